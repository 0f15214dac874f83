"""The auction's kernels emulated in NumPy (``emulate=True``): the same steps as ``auction.cu``, one array
operation each, for tests and machines without a GPU (slow, but bid for bid the GPU's algorithm)."""

from __future__ import annotations

import numpy as np

from . import auction  # (its Gauss-Seidel settings, read at call time: tests change them)


class EmulatedKernels:
    """The same kernels, sequentially in NumPy: exercises the driver on machines without a GPU (tests)."""

    xp = np

    def phase(self, *args, **kwargs) -> bool:
        return False  # the emulation runs the per-round path

    def _best_two(self, prob, price, i):
        cols, costs = prob.row(i)
        values = costs + price[cols]
        if values.size == 0:
            return None
        order = np.lexsort((cols, values))
        j1, b1 = int(cols[order[0]]), int(values[order[0]])
        b2 = int(values[order[1]]) if values.size > 1 else None
        return b1, j1, b2

    def bid(self, prob, price, lst, count, zero_count, eps, target, bid, col_bid, error):
        zero_count[0] = 0
        for t in range(int(count[0])):
            i = lst[t]
            best = self._best_two(prob, price, i)
            if best is None:
                error[0] = 1
                target[i] = -1
                continue
            b1, j1, b2 = best
            gap = prob.single_gap if b2 is None else b2 - b1
            target[i] = j1
            bid[i] = price[j1] + gap + eps
            col_bid[j1] = max(col_bid[j1], bid[i])

    def claim(self, prob, lst, count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count):
        listed = [int(i) for i in lst[:int(count[0])]]
        for i in listed:  # nominate: the lowest row among a column's highest bids
            j = target[i]
            if j >= 0 and bid[i] == col_bid[j]:
                winner[j] = max(int(winner[j]), prob.n - i)
        pushed = []
        for i in listed:  # claim, and the column's bid back at rest
            j = target[i]
            if j < 0:
                continue
            if winner[j] == prob.n - i:
                col_bid[j] = 0
                winner[j] = -1
                old = int(owner[j])
                owner[j] = i
                price[j] = bid[i]
                assigned[i] = j
                if old >= 0:
                    assigned[old] = -1
                    pushed.append(old)
            else:
                pushed.append(i)
        start = int(nxt_count[0])
        nxt[start:start + len(pushed)] = pushed
        nxt_count[0] = start + len(pushed)

    def init(self, prob, price, eps, assigned, owner, lst, count):
        for i in range(prob.n):
            j = assigned[i]
            push = j < 0
            if not push:
                b1 = self._best_two(prob, price, i)[0]
                cols, costs = prob.row(i)
                mine = int(costs[cols == j][0]) + int(price[j])
                if mine > b1 + eps:
                    push = True
                    assigned[i] = -1
                    owner[j] = -1
            if push:
                lst[count[0]] = i
                count[0] += 1

    def tail(self, prob, price, list0, list1, counts, parity, eps, target, bid, col_bid, winner, owner,
             assigned, max_iters, stop_count, info, error):
        it = 0
        while it < max_iters:
            cur, nxt = (list1, list0) if parity else (list0, list1)
            cur_count, nxt_count = counts[parity:parity + 1], counts[1 - parity:2 - parity]
            if cur_count[0] <= stop_count or error[0]:
                break
            if cur_count[0] <= min(auction.GAUSS_SEIDEL_ROWS, auction.GAUSS_SEIDEL_QUEUE):
                it = self._gauss_seidel(prob, price, cur, cur_count, eps, owner, assigned, max_iters, it, error)
                break
            self.bid(prob, price, cur, cur_count, nxt_count, eps, target, bid, col_bid, error)
            self.claim(prob, cur, cur_count, target, bid, col_bid, winner, owner, assigned, price, nxt, nxt_count)
            parity = 1 - parity
            it += 1
        info[0], info[1] = it, parity

    def _gauss_seidel(self, prob, price, lst, count, eps, owner, assigned, max_iters, it, error):
        queue = sorted(int(i) for i in lst[:int(count[0])])
        while queue and it < max_iters:
            i = queue.pop(0)
            best = self._best_two(prob, price, i)
            if best is None:
                error[0] = 1
                queue.insert(0, i)
                break
            b1, j1, b2 = best
            price[j1] += (prob.single_gap if b2 is None else b2 - b1) + eps
            evicted = int(owner[j1])
            owner[j1] = i
            assigned[i] = j1
            if evicted >= 0:
                assigned[evicted] = -1
                queue.append(evicted)
            it += 1
        lst[:len(queue)] = queue
        count[0] = len(queue)
        return it
