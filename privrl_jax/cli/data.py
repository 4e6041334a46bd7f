"""`privrl data ...`: collect and inspect D4RL-format datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from privrl_jax.cli._common import (
    SetOption,
    config_option,
    load_or_fail,
    options_to_values,
)

app = typer.Typer(
    help="Offline datasets: collect maze2d data, inspect HDF5 files.",
    no_args_is_help=True,
)


@app.command()
def collect(
    out: Annotated[Path, typer.Option(help="Output HDF5 file (written atomically).")],
    env: Annotated[
        str | None, typer.Option(help="maze2d task, e.g. maze2d-umaze.")
    ] = None,
    size: Annotated[int | None, typer.Option(help="Number of transitions.")] = None,
    seed: Annotated[int | None, typer.Option(help="PRNG seed.")] = None,
    action_noise: Annotated[
        float | None, typer.Option(help="Expert action-noise std (D4RL: 0.5).")
    ] = None,
    num_envs: Annotated[int | None, typer.Option(help="Parallel env streams.")] = None,
    chunk_steps: Annotated[
        int | None, typer.Option(help="Steps per env per jitted chunk.")
    ] = None,
    config: Annotated[str | None, config_option("data")] = None,
    overrides: SetOption = None,
) -> None:
    """Collect a D4RL-style maze2d dataset with the noisy waypoint expert.

    Values come from the config, then the options, then --set (e.g. --set size=5000).
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
    path = pipelines.run_collect(cfg, out)
    typer.echo(f"wrote {cfg.size} transitions of {cfg.env} to {path}")


@app.command()
def info(path: Annotated[Path, typer.Argument(help="D4RL-format HDF5 file.")]) -> None:
    """Print size, shapes, rewards and episode statistics of a dataset."""
    from privrl_jax import data

    t = data.load_hdf5(path)
    _, lengths = data.episode_boundaries(t)
    rewards = np.asarray(t.rewards)
    typer.echo(f"transitions      {len(t)}")
    typer.echo(f"obs / act dims   {t.observations.shape[1]} / {t.actions.shape[1]}")
    typer.echo(
        f"episodes         {len(lengths)} "
        f"(length mean {lengths.mean():.1f}, max {lengths.max()})"
    )
    typer.echo(f"terminals        {int(np.asarray(t.terminals).sum())}")
    typer.echo(f"timeouts         {int(np.asarray(t.timeouts).sum())}")
    typer.echo(f"reward mean      {rewards.mean():.4f}")
    for k, v in data.read_hdf5_metadata(path).items():
        typer.echo(f"meta {k:11s} {v}")
