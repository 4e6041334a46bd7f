"""`privrl data ...`: collect and inspect D4RL-format datasets."""

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

app = typer.Typer(
    help="Offline datasets: collect maze2d data, inspect HDF5 files.",
    no_args_is_help=True,
)

# The defaults shown in --help are `CollectConfig`'s (tests/cli/test_help.py
# keeps them equal); the options default to None so that a --config can set them.


# --set examples this command's config accepts (tests/cli/test_help.py loads them).
CollectSet = set_option("size=5000", "action_noise=0.3")


@app.command()
def collect(
    out: Annotated[
        Path,
        typer.Option(
            help="Output HDF5 file (written atomically; never replaced "
            "without --overwrite)."
        ),
    ],
    env: Annotated[
        str | None,
        typer.Option(
            help=with_default(
                "maze2d task, e.g. maze2d-medium-v1 (D4RL physics) or "
                "maze2d-medium-legacy.",
                "maze2d-umaze-v1",
            )
        ),
    ] = None,
    size: Annotated[
        int | None,
        typer.Option(help=with_default("Number of transitions.", 1_000_000)),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help=with_default("PRNG seed.", 0))
    ] = None,
    action_noise: Annotated[
        float | None,
        typer.Option(help=with_default("Expert action-noise std (D4RL: 0.5).", 0.5)),
    ] = None,
    num_envs: Annotated[
        int | None,
        typer.Option(
            help=with_default(
                "Parallel env streams; lowered (and said so) when --size gives a "
                "stream "
                "less than one episode.",
                1000,
            )
        ),
    ] = None,
    chunk_steps: Annotated[
        int | None,
        typer.Option(help=with_default("Steps per env per jitted chunk.", 100)),
    ] = None,
    config: Annotated[str | None, config_option("data")] = None,
    overrides: CollectSet = None,
    overwrite: OverwriteFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Collect a D4RL-style maze2d dataset with the noisy waypoint expert.

    Values come from the config, then the options, then --set (e.g. --set size=5000).
    For a fast try: --config test (2000 transitions).
    """
    from privrl_jax import pipelines

    cfg = load_or_fail(
        pipelines.load_config,
        pipelines.CollectConfig,
        pipelines.qualify_config(config, "data"),
        overrides or [],
        values=options_to_values(
            env=env,
            size=size,
            seed=seed,
            action_noise=action_noise,
            num_envs=num_envs,
            chunk_steps=chunk_steps,
        ),
    )
    # Passed only when given: tests/test_readme.py stubs the pipeline with
    # two-argument fakes.
    extra = {"overwrite": True} if overwrite else {}
    path = pipelines.run_collect(cfg, out, **extra)
    if as_json:
        summary = {
            "path": str(path),
            "env": cfg.env,
            "size": cfg.size,
            "num_envs": cfg.resolved_num_envs(),
            "seed": cfg.seed,
        }
        typer.echo(json.dumps(summary))
    else:
        typer.echo(f"wrote {cfg.size} transitions of {cfg.env} to {path}")


@app.command()
def info(
    path: Annotated[Path, typer.Argument(help="D4RL-format HDF5 file.")],
    as_json: JsonFlag = False,
) -> None:
    """Print size, shapes, rewards and episode statistics of a dataset."""
    import numpy as np  # noqa: PLC0415

    from privrl_jax import data

    t = data.load_hdf5(path)
    _, lengths = data.episode_boundaries(t)
    rewards = np.asarray(t.rewards)
    summary = {
        "transitions": len(t),
        "obs_dim": int(t.observations.shape[1]),
        "act_dim": int(t.actions.shape[1]),
        "episodes": len(lengths),
        "episode_length_mean": float(lengths.mean()),
        "episode_length_max": int(lengths.max()),
        "terminals": int(np.asarray(t.terminals).sum()),
        "timeouts": int(np.asarray(t.timeouts).sum()),
        "reward_mean": float(rewards.mean()),
        "metadata": data.read_hdf5_metadata(path),
    }
    if as_json:
        typer.echo(json.dumps(summary, default=str))
        return
    s = summary
    typer.echo(f"transitions      {s['transitions']}")
    typer.echo(f"obs / act dims   {s['obs_dim']} / {s['act_dim']}")
    typer.echo(
        f"episodes         {s['episodes']} "
        f"(length mean {s['episode_length_mean']:.1f}, max {s['episode_length_max']})"
    )
    typer.echo(f"terminals        {s['terminals']}")
    typer.echo(f"timeouts         {s['timeouts']}")
    typer.echo(f"reward mean      {s['reward_mean']:.4f}")
    for k, v in s["metadata"].items():
        typer.echo(f"meta {k:11s} {v}")
