"""`privrl agent ...`: train and evaluate offline-RL agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from privrl_jax.cli._common import (
    JsonFlag,
    OverwriteFlag,
    config_option,
    load_or_fail,
    options_to_values,
    set_option,
    with_default,
)

app = typer.Typer(help="Offline-RL agents: TD3+BC, IQL, EDAC.", no_args_is_help=True)

# The defaults shown in --help are `AgentTrainConfig`'s (tests/cli/test_help.py keeps
# them equal); the options default to None so that a --config can set them.


# --set examples this command's config accepts (tests/cli/test_help.py loads them).
AgentSet = set_option("agent.alpha=2.5", "agent.hidden_dims=[64,64]")


@app.command("train")
def train(
    out: Annotated[
        Path,
        typer.Option(
            help="Output directory (config.yaml, result.json, learning_curve.png): "
            "new, empty, or an earlier run's (replaced only with --overwrite)."
        ),
    ],
    algo: Annotated[
        str | None,
        typer.Option(help="td3bc, iql or edac (required: here, in --config or --set)."),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(help="D4RL-format HDF5 file of --env (required)."),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            help="Evaluation env, e.g. maze2d-umaze-v1, or a MuJoCo task "
            "such as halfcheetah-medium-v2 (required)."
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            help=with_default(
                "Gradient updates: a multiple of --chunk, or fewer than --chunk (one "
                "chunk of --steps updates).",
                100_000,
            )
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help=with_default("PRNG seed.", 0))
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            help=with_default("Minibatch size, at most the dataset's size.", 256)
        ),
    ] = None,
    chunk: Annotated[
        int | None,
        typer.Option(
            help=with_default(
                "Updates per jitted scan call (progress, metrics and evaluations "
                "happen "
                "between chunks).",
                1000,
            )
        ),
    ] = None,
    eval_every: Annotated[
        int | None,
        typer.Option(
            help=with_default(
                "Updates between evaluations, a multiple of --chunk.",
                "about a tenth of --steps",
            )
        ),
    ] = None,
    eval_episodes: Annotated[
        int | None,
        typer.Option(help=with_default("Episodes per evaluation.", 100)),
    ] = None,
    eval_backend: Annotated[
        str | None,
        typer.Option(
            help=with_default(
                "Where evaluations run: jax, or mujoco (real MuJoCo, pip install -e "
                '".\\[mujoco]": D4RL\'s point maze for maze2d-*-v1, and the only '
                "backend "
                "of the locomotion and kitchen tasks, e.g. hopper-medium-v2, "
                "kitchen-mixed-v0).",
                "jax",
            )
        ),
    ] = None,
    config: Annotated[str | None, config_option(None)] = None,
    overrides: AgentSet = None,
    overwrite: OverwriteFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Train an agent on DATASET and evaluate it in ENV.

    Values come from the config, then the options, then --set; the agent's own
    hyper-parameters are the `agent` section (e.g. --set agent.alpha=2.5). Every
    input is checked before anything is written.
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
            eval_backend=eval_backend,
        ),
    )
    # Passed only when given: tests/test_readme.py stubs the pipeline with
    # two-argument fakes.
    extra = {"overwrite": True} if overwrite else {}
    result = pipelines.run_agent_train(config, out, **extra)
    final = result["final"]
    if as_json:
        typer.echo(json.dumps({"out": str(out), "final": final}))
        return
    score = (
        f", normalised score {final['score_mean']:.1f}" if "score_mean" in final else ""
    )
    typer.echo(
        f"{config.algo} on {config.env}: return {final['return_mean']:.2f}{score}; "
        f"wrote {out}/result.json"
    )
