"""The stand-in's data path honours the YAML's pixel bounds as the real MindSpeed-MM's does: its loader sets
``preprocess_parameters``' media settings on the processor, where the mm_plugin's resize reads them, so a wrong
``image_max_pixels`` / ``image_min_pixels`` changes the batch (and G2's data parity can catch it on the stand-in)."""

import pytest

from test_contract_data_model import _dataset_param


def _media_tokens(mm, standin, **pre) -> tuple[int, list[list[int]]]:
    mm("mindspeed_mm.fsdp.data.datasets.huggingface.qwen2vl_dataset")
    data = mm("mindspeed_mm.fsdp.data")
    data_args = _dataset_param(mm, standin)
    for key, value in pre.items():
        setattr(data_args.dataset_param.preprocess_parameters, key, value)
    ds = data.build_mm_dataset(data_args.dataset_param)
    batch = next(iter(data.build_mm_dataloader(ds, {**data_args.dataloader_param.to_dict(), "batch_size": 2},
                                               dataset_param=data_args.dataset_param)))
    return batch["mm_token_type_ids"].sum().item(), batch["image_grid_thw"].tolist()


def test_the_yaml_pixel_bounds_reach_the_resize(mm, standin):
    # the sample image is 64x64 (4096 pixels), patch 16, merge 2: a 1x4x4 grid, 4 image tokens per sample
    assert _media_tokens(mm, standin, image_max_pixels=4096, image_min_pixels=0) == (2 * 4, [[1, 4, 4]] * 2)
    # a max of 1024 pixels scales it to 32x32 before the processor: a 1x2x2 grid, 1 token per sample
    assert _media_tokens(mm, standin, image_max_pixels=1024, image_min_pixels=0) == (2 * 1, [[1, 2, 2]] * 2)
    # (a min bound enlarges it, but this processor's own pixel bound then takes it back to 64x64: the loader test
    # below checks that the min reaches the processor)


def test_the_loader_sets_every_media_setting_on_the_processor(mm, standin):
    convert = mm("mindspeed_mm.fsdp.data.data_utils.func_utils.convert")
    args = _dataset_param(mm, standin).dataset_param.preprocess_parameters
    args.video_max_pixels, args.video_min_pixels = 12345, 67
    processor = convert.load_tokenizer(args)["processor"]
    assert processor is not None
    for key in convert.MEDIA_SETTINGS:
        assert getattr(processor, key) == getattr(args, key), key
    assert (processor.video_max_pixels, processor.video_min_pixels) == (12345, 67)


@pytest.fixture(autouse=True)
def _tests_dir_on_path(monkeypatch):
    import sys
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
