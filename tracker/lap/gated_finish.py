"""Shortest augmenting paths that finish the stages of the gated auction (:mod:`tracker.lap.gated_auction`).

Why: with generous gates the auction's last few bidders run long eviction chains and price wars, one round
each: 200k-500k sequential rounds at 100k nodes, f = 0.5 (``benchmarks/results/lap_generous_h100.md``).
A shortest augmenting path (the step of Jonker & Volgenant's and of every successive-shortest-path
method; Bertsekas suggests it to finish an auction) settles one bidder with one search instead.

The search runs on the auction's own state and keeps its invariant, eps-complementary slackness (eps-CS)
for the phase's eps, so the auction's exactness argument is unchanged. With ``own(i)`` the value of row
``i``'s assignment and ``r(i, k) = cost(i, k) + price[k] - own(i)`` (eps-CS: ``r >= -eps``, 0 on the
assigned edge), the search uses the clipped reduced costs ``r+ = max(r, 0)`` (``r+ <= r + eps``):

* **forward** (a free row ``s``, own(s) := its best value): labels ``d`` on columns; a free column is a
  terminal, and so is the private option of a column's owner ``i`` (at ``d + max(priv_i - own(i), 0)``).
  ``D`` = the nearest terminal. Prices of columns labelled below ``D`` rise by ``D - d``; then every row
  on the path takes the next column (or its private option). For an expanded row, ``d_k <= d + r+(i, k)``
  for all its columns, so the new reduced costs are ``>= r+ - r - ... >= -eps``; for other rows prices
  only rose. Free columns keep their prices (their labels are ``>= D``).
* **reverse** (a stale column ``j``: unmatched at a positive price, which optimality forbids): the mirror
  image, columns bidding for rows. Labels on rows; a row on its private option is a terminal; a row on
  column ``c`` leads to "``c`` left unmatched at price 0" (at ``d + price[c]``) and to ``c``'s other rows.
  ``j``'s potential is its best attainable price ``P = max(0, max_i own(i) - cost(i, j))``; it may itself
  stay unmatched (terminal at ``P``). Rows labelled below ``D`` lower their values by ``D - d``, the
  columns' prices follow (``price = value - cost``; never below 0, since ``D <= d + price``), and ``j``
  ends at price ``P - D``, or 0 when unmatched.

Searches are exact shortest paths on ``r+`` (label-correcting rounds on the GPU, ``gated_finish.cuh``;
Dijkstra here), so the terminal may differ between the two only among equal-cost ties.

This module is the NumPy emulation used by ``gated_auction._Emulated`` (tests without a GPU).
"""

from __future__ import annotations

import heapq

INF = (1 << 62) - 1
PRIVATE = -2


def _own(prob, ws, i):
    a = int(ws.assigned[i])
    if a == PRIVATE:
        return int(prob.priv[i])
    return int(ws.acost[i]) + int(ws.price[a]) if a >= 0 else INF


def _relax(heap, dist, pred, best, x, nd, via) -> None:
    """Lower node ``x``'s label to ``nd`` (reached ``via``: partner and edge cost) if that beats both its label
    and the best terminal so far (``best[0]``)."""
    if nd < best[0] and nd < dist.get(x, INF):
        dist[x], pred[x] = nd, via
        heapq.heappush(heap, (nd, x))


def _pops(heap, dist, best, visit) -> None:
    """Dijkstra's pops: each node at its final label below the best terminal (``best[0]``, which ``visit`` may
    lower), in order, to ``visit(node, label)``; stops when it returns True."""
    while heap:
        d, v = heapq.heappop(heap)
        if d > dist[v]:
            continue
        if d >= best[0] or visit(v, d):
            break


def forward(prob, ws, s: int) -> None:
    """Settle free row ``s`` by one shortest augmenting path (updates ``ws`` in place)."""
    price, owner, assigned, acost = ws.price, ws.owner, ws.assigned, ws.acost
    options = [int(prob.cost[k]) + int(price[prob.cols[k]]) for k in range(prob.indptr[s], prob.indptr[s + 1])]
    if prob.priv[s] < INF:
        options.append(int(prob.priv[s]))
    if not options:
        raise RuntimeError("a row without options")
    phi_s = min(options)
    best = [int(prob.priv[s]) - phi_s, ("private", s)] if prob.priv[s] < INF else [INF, None]
    dist, pred, heap = {}, {}, []

    def expand(i, d, phi):
        if i != s and prob.priv[i] < INF and d + max(int(prob.priv[i]) - phi, 0) < best[0]:
            best[:] = d + max(int(prob.priv[i]) - phi, 0), ("private", i)
        for k in range(prob.indptr[i], prob.indptr[i + 1]):
            x = int(prob.cols[k])
            _relax(heap, dist, pred, best, x, d + max(int(prob.cost[k]) + int(price[x]) - phi, 0),
                   (i, int(prob.cost[k])))

    def visit(v, d):
        if owner[v] < 0:
            best[:] = d, ("column", v)
            return True
        i = int(owner[v])
        expand(i, d, int(acost[i]) + int(price[v]))
        return False

    expand(s, 0, phi_s)
    _pops(heap, dist, best, visit)
    best_d, term = best
    if term is None:
        raise RuntimeError("a row without options")
    path = []  # (row, new column or PRIVATE, its cost)
    if term[0] == "private":
        i = term[1]
        path.append((i, PRIVATE, int(prob.priv[i])))
        v = -1 if i == s else int(assigned[i])
    else:
        v = term[1]
    while v >= 0:
        i, c = pred[v]
        path.append((i, v, c))
        v = -1 if i == s else int(assigned[i])
    for v, d in dist.items():
        if d < best_d:
            price[v] += best_d - d
    for i, v, c in path:
        assigned[i], acost[i] = v, c
        if v >= 0:
            owner[v] = i


def reverse(prob, ws, j: int) -> None:
    """Settle stale column ``j`` (unmatched, price > 0) by one shortest path of the mirror problem."""
    price, owner, assigned, acost = ws.price, ws.owner, ws.assigned, ws.acost
    if owner[j] >= 0 or price[j] <= 0:
        return
    betas = [_own(prob, ws, int(prob.crows[q])) - int(prob.ccost[q]) for q in range(prob.cptr[j], prob.cptr[j + 1])]
    phi_j = max([0] + betas)
    best = [phi_j, ("column", j)]
    dist, pred, heap = {}, {}, []

    def expand(c, d, phi, skip):
        for q in range(prob.cptr[c], prob.cptr[c + 1]):
            x = int(prob.crows[q])
            if x != skip:
                _relax(heap, dist, pred, best, x, d + max(int(prob.ccost[q]) + phi - _own(prob, ws, x), 0),
                       (c, int(prob.ccost[q])))

    def visit(v, d):
        a = int(assigned[v])
        if a == PRIVATE:
            best[:] = d, ("row", v)
            return True
        if d + int(price[a]) < best[0]:
            best[:] = d + int(price[a]), ("column", a)
        expand(a, d, int(price[a]), v)
        return False

    expand(j, 0, phi_j, -1)
    _pops(heap, dist, best, visit)
    best_d, term = best
    value = {v: _own(prob, ws, v) - max(best_d - d, 0) for v, d in dist.items()}
    path = []  # (row, column that takes it, cost); (-1, column, 0): the column left unmatched at price 0
    if term[0] == "column":
        path.append((-1, term[1], 0))
        v = -1 if term[1] == j else int(owner[term[1]])
    else:
        v = term[1]
    while v >= 0:
        c, cost = pred[v]
        path.append((v, c, cost))
        v = -1 if c == j else int(owner[c])
    for i, c, cost in path:
        if i < 0:
            owner[c], price[c] = -1, 0
        else:
            assigned[i], acost[i], owner[c] = c, cost, i
    for v, val in value.items():
        a = int(assigned[v])
        if a >= 0:
            price[a] = val - int(acost[v])
    if owner[j] < 0:
        price[j] = 0
