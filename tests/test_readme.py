"""The README's DP-SGD example runs and learns within its budget."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_dpsgd_example():
    code = re.search(r"## DP-SGD on a flax model\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    ns: dict = {}
    exec(compile(code.replace("print(", "eps = ("), "README", "exec"), ns)  # noqa: S102
    model, params, state, x, y = ns["model"], ns["params"], ns["state"], ns["x"], ns["y"]
    before = np.mean((np.asarray(model.apply(params, x[:2000]))[:, 0] - y[:2000]) ** 2)
    after = np.mean((np.asarray(model.apply(state.params, x[:2000]))[:, 0] - y[:2000]) ** 2)
    assert after < 0.5 * before
    assert 2.9 <= ns["eps"] <= 3.0
