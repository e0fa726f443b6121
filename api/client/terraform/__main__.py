"""``python -m spate.api.client.terraform``: serve the provider to Terraform."""

from spate.api.client.terraform.provider import main

if __name__ == "__main__":
    main()
