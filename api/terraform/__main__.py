"""``python -m spate.api.terraform``: serve the provider to Terraform."""

from spate.api.terraform.provider import main

if __name__ == "__main__":
    main()
