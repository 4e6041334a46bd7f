"""agents subpackage."""
