"""What the PrivORL-n, PrivORL-j and marginal pipelines share, by role (private to
``pipelines``): :mod:`.inputs` (checks and the public encoding), :mod:`.train`
(pre-training loop, DP fine-tuning wiring, plan), :mod:`.release` (ledger, release,
report files), :mod:`.scores` (fidelity, agent scores) and :mod:`.report` (Markdown).

Each pipeline keeps its own unit of privacy (a transition or a trajectory), data layout,
models and audit; the helpers here take those as arguments. The normaliser is fitted on
public data only.
"""
