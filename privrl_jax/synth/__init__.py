"""synth subpackage."""
