"""diffusion subpackage."""
