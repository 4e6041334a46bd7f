"""ope subpackage."""
