def build_iterations(train_dl=None, val_dl=None, test_dl=None, iterator_type="cyclic"):
    """(train, valid, test) iterators; cyclic ones restart their loader when it runs out."""
    def _cyclic_iter(dl):
        while True:
            for x in dl:
                yield x

    def _make(dl):
        if dl is None:
            return None
        return _cyclic_iter(dl) if iterator_type == "cyclic" else iter(dl)

    return _make(train_dl), _make(val_dl), _make(test_dl)
