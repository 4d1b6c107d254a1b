"""Built-in providers, registered through the same hook as third-party ones."""
