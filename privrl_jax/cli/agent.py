"""`privrl agent ...`: train and evaluate offline-RL agents."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(help="Offline-RL agents: TD3+BC, IQL, EDAC.", no_args_is_help=True)


@app.command("train")
def train(
    algo: str = typer.Option(..., help="td3bc, iql or edac"),
    dataset: Path = typer.Option(..., help="D4RL-format HDF5 file"),
    env: str = typer.Option(..., help="evaluation env, e.g. maze2d-umaze"),
    steps: int = typer.Option(100_000, help="gradient updates (multiple of --chunk)"),
    seed: int = typer.Option(0),
    out: Path = typer.Option(..., help="output directory (result.json, learning_curve.png)"),
    batch_size: int = typer.Option(256),
    chunk: int = typer.Option(1000, help="updates per jitted scan call"),
    eval_every: int = typer.Option(None, help="updates between evaluations"),
    eval_episodes: int = typer.Option(100),
    set_: list[str] = typer.Option(
        [], "--set", help="agent config override KEY=VALUE (JSON value), repeatable"
    ),
) -> None:
    """Train an agent on DATASET and evaluate it in ENV."""
    from privrl_jax import pipelines

    overrides = {}
    for item in set_:
        if "=" not in item:
            raise typer.BadParameter(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            overrides[k] = json.loads(v)
        except json.JSONDecodeError:
            overrides[k] = v
        if isinstance(overrides[k], list):
            overrides[k] = tuple(overrides[k])
    config = pipelines.AgentTrainConfig(
        algo=algo, dataset=str(dataset), env=env, steps=steps, seed=seed,
        batch_size=batch_size, chunk_size=chunk, eval_every=eval_every,
        eval_episodes=eval_episodes, agent_overrides=overrides,
    )
    result = pipelines.run_agent_train(config, out)
    final = result["final"]
    score = f", normalised score {final['score_mean']:.1f}" if "score_mean" in final else ""
    typer.echo(f"{algo} on {env}: return {final['return_mean']:.2f}{score}; wrote {out}/result.json")
