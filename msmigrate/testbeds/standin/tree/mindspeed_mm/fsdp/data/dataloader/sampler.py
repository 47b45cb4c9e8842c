import torch


class BaseRandomBatchSampler(torch.utils.data.Sampler):
    """Per-rank batches of indices; drop_last only; reshuffled per epoch from `seed`."""

    def __init__(self, dataset_size, batch_size, num_replicas, rank, shuffle=True, drop_last=True, seed=42,
                 data_sharding=False):
        if not drop_last:
            raise ValueError("It is not implemented that the drop_last is false.")
        self.dataset_size, self.batch_size = dataset_size, batch_size
        self.num_replicas, self.rank, self.shuffle, self.seed = num_replicas, rank, shuffle, seed
        self.epoch = 0

    def __len__(self):
        return self.dataset_size // (self.batch_size * self.num_replicas)

    def __iter__(self):
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_size, generator=g).tolist()
        else:
            order = list(range(self.dataset_size))
        self.epoch += 1
        step = self.batch_size * self.num_replicas
        for start in range(0, len(self) * step, step):
            chunk = order[start:start + step]
            yield chunk[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]
