"""The reference engine's image: its Dockerfile, pinned requirements and the wheelhouse script."""
