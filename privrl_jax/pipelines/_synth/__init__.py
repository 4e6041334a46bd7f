"""What the PrivORL-n, PrivORL-j, marginal and PATE-GAN pipelines share, by role.

Private to ``pipelines``: :mod:`.inputs` (checks and the public encoding), :mod:`.train`
(pre-training loop, DP fine-tuning wiring, plan), :mod:`.release` (noise secret, ledger,
release, report files), :mod:`.scores` (fidelity, agent scores), :mod:`.report`
(Markdown) and :mod:`.baseline` (the whole run of the one-process transition baselines,
marginal and PATE-GAN).

Each pipeline keeps its own unit of privacy (a transition or a trajectory), data layout,
models and audit; the helpers here take those as arguments. The normaliser is fitted on
public data only.
"""
