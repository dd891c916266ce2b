"""Derivative-free minimisation (Nelder-Mead) for fitting the kernel models: numpy only, deterministic."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

REFLECT, EXPAND, CONTRACT, SHRINK = 1.0, 2.0, 0.5, 0.5  # the method's standard coefficients


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, iterations: int,
                tolerance: float) -> tuple[np.ndarray, float]:
    """The minimum of f found from x0 with an initial simplex of edge `step` along each axis."""
    simplex = [np.asarray(x0, dtype=float)]
    simplex += [simplex[0] + step * np.eye(len(x0))[i] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values, kind="stable")
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < tolerance:
            break
        centre = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centre + REFLECT * (centre - worst)
        fr = f(reflected)
        if fr < values[0]:
            expanded = centre + EXPAND * (centre - worst)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centre + CONTRACT * (worst - centre)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + SHRINK * (x - simplex[0]) for x in simplex]
                values = [values[0], *(f(x) for x in simplex[1:])]
    best = int(np.argmin(values))
    return simplex[best], values[best]
