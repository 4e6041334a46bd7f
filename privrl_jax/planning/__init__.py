"""planning subpackage."""
