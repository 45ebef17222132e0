"""CPU reference engine: DFlash speculative decoding on tiny self-built checkpoints.

Light on purpose: importing this package (or `recipe`, `checkpoints`, `corpus`) must not
import torch, so the harness process can locate and build checkpoints without it. The
server (`python -m reference_engine`) and the build (`reference_engine.train`) run in
the engine's own environment.
"""
