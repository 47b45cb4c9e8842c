"""Weight-name and layout operators between a HF state dict and the Megatron one. Each ``apply`` goes HF ->
Megatron in place; ``revert`` undoes it. Layout facts (the real converters' convention): the LLM's q/k/v become
one ``linear_qkv`` ordered per KV group [group's q heads, its k head, its v head]; the ViT's fused qkv goes from
[all q | all k | all v] to per-head [q_h, k_h, v_h]; gate and up stack (gate first) into ``linear_fc1``."""
import re
from abc import ABC, abstractmethod

import torch

from checkpoint.common.constant import DIGIT_FMT


def _layers(pattern, names):
    found = [int(m.group(1)) for n in names for m in [re.fullmatch(pattern, n)] if m]
    return max(found) + 1 if found else 0


class Operator(ABC):
    @abstractmethod
    def apply(self, weights):
        pass

    @abstractmethod
    def revert(self, weights):
        pass


class RenameOp(Operator):
    def __init__(self, patterns):
        self.patterns = patterns

    @staticmethod
    def _rename(weights, pairs):
        for name in list(weights):
            new = name
            for pattern, target in pairs:
                numbered = re.sub(r'\([^)]*\)', lambda _m, c=iter(range(1, 99)): f'\\{next(c)}', target)
                new = re.sub(pattern, numbered, new)
            if new != name:
                weights[new] = weights.pop(name)

    def apply(self, weights):
        self._rename(weights, self.patterns)

    def revert(self, weights):
        self._rename(weights, tuple((b, a) for a, b in self.patterns))


class MergeOp(Operator):
    def __init__(self, raw_names, new_name):
        self.raw_names = raw_names
        self.new_name = new_name

    @abstractmethod
    def merge(self, tensors):
        pass

    @abstractmethod
    def split(self, tensor):
        pass

    def apply(self, weights):
        for i in range(_layers(self.raw_names[0], weights)):
            names = [n.replace(DIGIT_FMT, str(i)) for n in self.raw_names]
            if all(n in weights for n in names):
                weights[self.new_name.replace(DIGIT_FMT, str(i))] = self.merge([weights.pop(n) for n in names])

    def revert(self, weights):
        for i in range(_layers(self.new_name, weights)):
            merged = self.new_name.replace(DIGIT_FMT, str(i))
            if merged in weights:
                for raw, t in zip(self.raw_names, self.split(weights.pop(merged))):
                    weights[raw.replace(DIGIT_FMT, str(i))] = t


class UpGateMergeOp(MergeOp):
    def merge(self, tensors):
        return torch.cat(tensors, dim=0)

    def split(self, tensor):
        return list(torch.chunk(tensor, 2, dim=0))


class QKVMergeOp(MergeOp):
    def __init__(self, raw_names, new_name, group, q_size, k_size, v_size):
        self.group, self.q_size, self.k_size, self.v_size = group, q_size, k_size, v_size
        super().__init__(raw_names, new_name)

    def merge(self, tensors):
        per_group = [t.chunk(self.group, dim=0) for t in tensors]
        return torch.cat([part for trio in zip(*per_group) for part in trio], dim=0)

    def split(self, tensor):
        trios = [blk.split([self.q_size, self.k_size, self.v_size], dim=0) for blk in tensor.chunk(self.group, dim=0)]
        return [torch.cat([t[j] for t in trios], dim=0) for j in range(3)]


class RelocateOp(Operator):
    """A fused qkv kept as one tensor on both sides, reordered between [q|k|v] and per-head [q_h k_h v_h]."""

    def __init__(self, name, new_name, group, split_size):
        self.name, self.new_name, self.group, self.split_size = name, new_name, group, split_size

    def _move(self, weights, name, new_name, to_heads):
        for i in range(_layers(name, weights)):
            old = name.replace(DIGIT_FMT, str(i))
            if old not in weights:
                continue
            t = weights.pop(old)
            if to_heads:
                parts = [p.chunk(self.group, dim=0) for p in t.split(self.split_size, dim=0)]
                out = torch.cat([h for trio in zip(*parts) for h in trio], dim=0)
            else:
                heads = [blk.chunk(3, dim=0) for blk in t.chunk(self.group, dim=0)]
                out = torch.cat([torch.cat([h[j] for h in heads], dim=0) for j in range(3)], dim=0)
            weights[new_name.replace(DIGIT_FMT, str(i))] = out

    def apply(self, weights):
        self._move(weights, self.name, self.new_name, to_heads=True)

    def revert(self, weights):
        self._move(weights, self.new_name, self.name, to_heads=False)


class BaseSplit(ABC):
    """How one Megatron tensor is cut across tensor-parallel ranks (``split``) and put back (``merge``)."""

    @staticmethod
    @abstractmethod
    def split(tp_size, value):
        pass

    @staticmethod
    @abstractmethod
    def merge(tp_values):
        pass


def _even(size, tp_size, what):
    if size % tp_size:
        raise ValueError(f"{what} of size {size} does not divide by tp_size {tp_size}")
    return size // tp_size


class RowSplit(BaseSplit):
    """Contiguous blocks of dim 0: the output rows of a column-parallel linear (a fused qkv ordered per KV group
    gives each rank whole groups), a bias of one, a vocabulary-parallel embedding."""

    @staticmethod
    def split(tp_size, value):
        return list(value.split(_even(value.shape[0], tp_size, "dim 0"), dim=0))

    @staticmethod
    def merge(tp_values):
        return torch.cat(tp_values, dim=0)


class ColSplit(BaseSplit):
    """Contiguous blocks of dim 1: the input columns of a row-parallel linear (linear_proj, linear_fc2)."""

    @staticmethod
    def split(tp_size, value):
        return list(value.split(_even(value.shape[1], tp_size, "dim 1"), dim=1))

    @staticmethod
    def merge(tp_values):
        return torch.cat(tp_values, dim=1)


class GLUSplit(BaseSplit):
    """A fused [gate; up] linear_fc1: each rank keeps its block of gate stacked on its block of up."""

    @staticmethod
    def split(tp_size, value):
        gate, up = value.chunk(2, dim=0)
        size = _even(gate.shape[0], tp_size, "gate rows")
        return [torch.cat((g, u), dim=0) for g, u in zip(gate.split(size, dim=0), up.split(size, dim=0))]

    @staticmethod
    def merge(tp_values):
        halves = [v.chunk(2, dim=0) for v in tp_values]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
