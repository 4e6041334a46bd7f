"""`privrl agent ...`: train and evaluate offline-RL agents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privrl_jax.cli._common import (
    SetOption,
    config_option,
    load_or_fail,
    options_to_values,
)

app = typer.Typer(help="Offline-RL agents: TD3+BC, IQL, EDAC.", no_args_is_help=True)


@app.command("train")
def train(
    out: Annotated[
        Path, typer.Option(help="output directory (result.json, learning_curve.png)")
    ],
    algo: Annotated[str | None, typer.Option(help="td3bc, iql or edac")] = None,
    dataset: Annotated[str | None, typer.Option(help="D4RL-format HDF5 file")] = None,
    env: Annotated[
        str | None, typer.Option(help="evaluation env, e.g. maze2d-umaze")
    ] = None,
    steps: Annotated[
        int | None, typer.Option(help="gradient updates (multiple of --chunk) [100000]")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="PRNG seed [0]")] = None,
    batch_size: Annotated[int | None, typer.Option(help="minibatch size [256]")] = None,
    chunk: Annotated[
        int | None, typer.Option(help="updates per jitted scan call [1000]")
    ] = None,
    eval_every: Annotated[
        int | None, typer.Option(help="updates between evaluations")
    ] = None,
    eval_episodes: Annotated[
        int | None, typer.Option(help="episodes per evaluation [100]")
    ] = None,
    config: Annotated[str | None, config_option(None)] = None,
    overrides: SetOption = None,
) -> None:
    """Train an agent on DATASET and evaluate it in ENV.

    Values come from the config, then the options, then --set; the agent's own
    hyper-parameters are the `agent` section (e.g. --set agent.alpha=2.5).
    """
    from privrl_jax import pipelines

    config = load_or_fail(
        pipelines.load_config,
        pipelines.AgentTrainConfig,
        config,
        overrides or [],
        values=options_to_values(
            algo=algo,
            dataset=dataset,
            env=env,
            steps=steps,
            seed=seed,
            batch_size=batch_size,
            chunk_size=chunk,
            eval_every=eval_every,
            eval_episodes=eval_episodes,
        ),
    )
    result = pipelines.run_agent_train(config, out)
    final = result["final"]
    score = (
        f", normalised score {final['score_mean']:.1f}" if "score_mean" in final else ""
    )
    typer.echo(
        f"{config.algo} on {config.env}: return {final['return_mean']:.2f}{score}; "
        f"wrote {out}/result.json"
    )
