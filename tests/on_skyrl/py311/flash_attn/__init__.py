"""flash-attn needs CUDA to build and run; SkyRL's model wrapper imports it at module level."""
