"""Training code for the shipped model pair: a small Qwen3 target and its DFlash drafter.

The pipeline is one file per stage, each runnable through `python -m refengine.train <stage>`:
corpus -> tokenizer -> tokens -> target -> greedy -> drafter -> tau -> card.
"""
