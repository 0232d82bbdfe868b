"""Labels that do not overlap: each label takes the nearest free place around the point it names (off
the other labels, off every plotted point, off fixed text such as roof labels), matplotlib and numpy only.

A greedy search, most crowded label first: around its anchor, rings of growing radius, each tried from
straight above round both sides. Positions are in display units (pixels of the figure at its own dpi);
a label placed far from its point gets a leader line from the caller. Deterministic (no randomness).
"""

from __future__ import annotations

import numpy as np

RINGS = 14  # radii tried, each a label height further out
ANGLES = 24  # places tried per ring


def _hits(lo: np.ndarray, hi: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Whether the box (lo, hi) overlaps each of ``boxes`` (K x 4)."""
    return ((np.minimum(hi[0], boxes[:, 2]) > np.maximum(lo[0], boxes[:, 0]))
            & (np.minimum(hi[1], boxes[:, 3]) > np.maximum(lo[1], boxes[:, 1])))


def _tries(height: float, offset: float) -> np.ndarray:
    """Offsets to try, nearest first; on a ring, upward first (the chart is emptier above its points)."""
    turn = np.array(sorted(range(ANGLES), key=lambda a: (min(a, ANGLES - a), a)))
    angles = np.pi / 2 + 2 * np.pi * turn / ANGLES
    radii = offset + height * 0.75 * np.arange(RINGS)
    return np.array([(r * np.cos(a), r * np.sin(a)) for r in radii for a in angles])


def place_labels(anchors: np.ndarray, size: np.ndarray, points: np.ndarray, fixed: np.ndarray,
                 bounds: tuple[float, float, float, float], offset: float) -> np.ndarray:
    """Label centres, one per anchor (N x 2), for labels of ``size`` (N x 2, width and height), as near
    as free to ``offset`` above their anchor; kept off ``points`` (M x 2, each a dot a label's height
    across), off ``fixed`` boxes (K x 4: x0, y0, x1, y1) and inside ``bounds`` (x0, y0, x1, y1). A label
    with no free place within reach keeps the place where it overlaps least."""
    anchors = np.asarray(anchors, float).reshape(-1, 2)
    n = len(anchors)
    half = np.asarray(size, float).reshape(n, 2) / 2 + 1.0  # a pixel of air around each label
    dot = float(half[:, 1].min()) * 0.6 if n else 0.0
    pts = np.asarray(points, float).reshape(-1, 2)
    taken = [np.asarray(fixed, float).reshape(-1, 4), np.hstack([pts - dot, pts + dot])]
    out = anchors + [0.0, offset]
    near = np.hypot(*(anchors[:, None, :] - anchors[None, :, :]).transpose(2, 0, 1)) < 3 * half[:, 1].max()
    for i in sorted(range(n), key=lambda i: (-int(near[i].sum()), i)):  # most crowded first
        boxes = np.vstack(taken)
        best, least = out[i], np.inf
        for move in _tries(2 * half[i, 1], offset):
            c = anchors[i] + move
            lo, hi = c - half[i], c + half[i]
            if lo[0] < bounds[0] or lo[1] < bounds[1] or hi[0] > bounds[2] or hi[1] > bounds[3]:
                continue
            clash = int(_hits(lo, hi, boxes).sum())
            if clash < least:
                best, least = c, clash
                if clash == 0:
                    break
        out[i] = best
        taken.append(np.hstack([best - half[i], best + half[i]])[None, :])
    return out


def overlaps(centres: np.ndarray, size: np.ndarray) -> int:
    """How many pairs of the labels (centres and sizes as in :func:`place_labels`) overlap."""
    half = np.asarray(size, float) / 2
    boxes = np.hstack([centres - half, centres + half])
    return sum(int(_hits(boxes[i, :2], boxes[i, 2:], boxes[i + 1:]).sum()) for i in range(len(boxes)))
