"""The HTTP family: ``websocket``, ``sse`` and ``polling_http`` sources, the ``webhook`` sink."""
