"""Offline-RL datasets: pytrees, HDF5 I/O, validation, normalisation, demand series.

The pytrees are `Transitions` (flat rows), `Trajectories` (zero-padded episodes) and
`Fragments`; files are read and written in the D4RL HDF5 format. POOL's demand
series are a synthetic weekly series and a Rossmann store-sales CSV loader.

Everything here runs on the host (NumPy / h5py) except the `Normalizer`, which is a
jittable pytree.
"""

from privrl_jax.data._demand import (
    load_rossmann,
    synthetic_demand,
)
from privrl_jax.data._fragments import (
    STEP_FIELDS,
    Fragments,
    trajectories_to_fragments,
)
from privrl_jax.data._hdf5 import (
    load_hdf5,
    read_hdf5_metadata,
    remove_stale_hdf5_temps,
    save_hdf5,
)
from privrl_jax.data._normalization import (
    DEFAULT_MIN_SCALE,
    Normalizer,
    fit_normalizer,
    normalizer_from_bounds,
)
from privrl_jax.data._trajectories import (
    episode_boundaries,
    trajectories_to_transitions,
    transitions_to_trajectories,
)
from privrl_jax.data._types import TRANSITION_FIELDS, Trajectories, Transitions
from privrl_jax.data._validation import validate_transitions

__all__ = [
    "DEFAULT_MIN_SCALE",
    "STEP_FIELDS",
    "TRANSITION_FIELDS",
    "Fragments",
    "Normalizer",
    "Trajectories",
    "Transitions",
    "episode_boundaries",
    "fit_normalizer",
    "load_hdf5",
    "load_rossmann",
    "normalizer_from_bounds",
    "read_hdf5_metadata",
    "remove_stale_hdf5_temps",
    "save_hdf5",
    "synthetic_demand",
    "trajectories_to_fragments",
    "trajectories_to_transitions",
    "transitions_to_trajectories",
    "validate_transitions",
]
