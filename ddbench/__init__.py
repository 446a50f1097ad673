"""ddbench: speculative decoding (AR, DFlash linear, DDTree chain and tree) compared under identical conditions."""

__version__ = "0.1.0"
