"""Root-cause extraction: failure signals per kind, rank prefixes, wrappers, and INFO/WARNING lines that never count."""

import pytest

from msmigrate.knowledge.real_log_corpus import load_corpus
from msmigrate.knowledge.root_cause import extract, strip_prefixes

TWO_RANKS = """[rank1]: Traceback (most recent call last):
[rank1]:   File "/x/train.py", line 10, in <module>
[rank1]:     main()
[rank1]:   File "/x/model.py", line 99, in forward
[rank1]: ValueError: shapes do not line up
[rank0]: [E ProcessGroupNCCL.cpp:1182] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
============================================================"""


def test_prefixes_are_stripped_and_name_the_rank():
    assert strip_prefixes("[rank3]: RuntimeError: x") == ("RuntimeError: x", 3)
    assert strip_prefixes("(WorkerDict pid=904548) [E331 socket.cpp:1011] timeout")[0] == "[E331 socket.cpp:1011] timeout"
    text, _ = strip_prefixes("ERROR 04-14 19:53:35 worker_base.py:581] RuntimeError: boom")
    assert text == "RuntimeError: boom"


def test_the_rank_torchrun_names_decides_over_a_later_collective_timeout():
    root = extract(TWO_RANKS)
    assert root.failed and root.failed_rank == 1
    assert root.primary.kind == "exception" and root.primary.text == "ValueError: shapes do not line up"
    assert 'File "/x/model.py", line 99, in forward' in root.evidence  # the decisive traceback's last frames
    assert "Watchdog" not in root.evidence  # rank 0's timeout is a consequence
    assert root.evidence.endswith("rank 1 exitcode  : 1 (pid: 4242)")  # the wrapper is kept, last


@pytest.mark.parametrize("line, kind", [
    ("EZ9999: Inner Error! The error from device(chipId:0, dieId:0)", "ascend"),
    ("EE1002: Stream synchronize timeout. rtDeviceSynchronize execute failed", "ascend"),
    ("E39999: Inner Error! Aicore kernel execute failed, device_id=0, stream_id=2", "ascend"),
    ("[W NPUStream.cpp:409] Warning: NPU warning, error code is 507035[Error]: vector core execution is abnormal",
     "ascend"),
    ("[ERROR] HCCL(36035,x):2025-05-13 [op_base.cc:974] HcclCommInitRootInfo failed.", "collective"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer", "exception"),
    ("NPU out of memory. Tried to allocate more than 1EB memory", "oom"),
    ("{'loss': 2.0968, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.4}", "nonfinite"),
    ("E1223 17:10:17.404000 530255 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
     "local_rank: 1 (pid: 530297) of binary: /usr/bin/python", "killed"),
])
def test_signal_kinds(line, kind):
    root = extract(line)
    assert root.failed and root.primary.kind == kind


@pytest.mark.parametrize("line", [
    "[2025-01-30 18:11:28] NCCL INFO Channel 00/02 :    0   1",
    "[INFO|2024-11-29 16:18:52] llamafactory.cli:157 >> Initializing distributed tasks at: 127.0.0.1:28787",
    "2024-10-21 10:09:43,821 - lmdeploy - INFO - HCCL_EXEC_TIMEOUT=0 HCCL timeout disabled",
    "/x/torch_npu/utils/collect_env.py:58: UserWarning: Warning: The /usr/local/Ascend owner does not match.",
    "[W compiler_depend.ts:623] Warning: expandable_segments currently defaults to false.",
    "FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu')`.",
    " iteration 123/ 250000 | lm loss: 2.493043E+00 | number of skipped iterations: 0 | number of nan iterations: 0 |",
])
def test_info_and_warning_lines_are_no_failure(line):
    root = extract(line)
    assert not root.failed and root.primary is None


def test_warnings_are_collected_apart():
    root = extract("UserWarning: None of the inputs have requires_grad=True.\nValueError: real")
    assert root.primary.text == "ValueError: real"
    assert root.warnings == ["UserWarning: None of the inputs have requires_grad=True."]


def test_a_cut_traceback_is_represented_by_its_last_frame():
    root = extract('Traceback (most recent call last):\n  File "/x/loader.py", line 357, in get_dataset\n')
    assert root.failed and root.primary.kind == "traceback" and "loader.py" in root.primary.text


def test_validation_error_block_is_kept_whole():
    log = ("[ERROR] Configuration loading failed: 2 validation errors for Arguments\n"
           "data.dataloader_param.shuffle\n  Field required [type=missing]\n"
           "data.dataloader_param.pin_memory\n  Field required [type=missing]\n")
    evidence = extract(log).evidence
    assert "data.dataloader_param.pin_memory Field required [type=missing]" in evidence


def test_wrapper_only_log_is_not_a_root_cause():
    root = extract("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n  exitcode  : 1 (pid: 1)")
    assert not root.failed and root.signals and all(s.wrapper for s in root.signals)


def test_no_healthy_log_of_the_real_corpus_shows_a_failure():
    healthy = [e for e in load_corpus() if e.healthy]
    assert len(healthy) >= 10
    assert [e.name for e in healthy if extract(e.log).failed] == []


def test_a_warning_in_the_warnings_module_layout_is_a_warning_whatever_its_category_is_called():
    """warnings.formatwarning writes "<file>.py:<line>: <Category>: <message>" and then the source line; a library's
    own Warning subclass may be called ...Error. A raised exception never looks like that."""
    log = ("/srv/app/jobs.py:40: RetiredError: 2025-01-09: the `idle_timeout` argument is now `scaledown`.\n"
           "  @job.define(\n"
           "step 10 loss 2.31\n")
    root = extract(log)
    assert not root.failed and root.warnings and "RetiredError" in root.warnings[0]
    raised = log + 'Traceback (most recent call last):\n  File "/srv/app/train.py", line 9, in <module>\n' \
                   "RuntimeError: expected a 4-D input\n"
    assert extract(raised).primary.text == "RuntimeError: expected a 4-D input"


def test_frames_without_their_traceback_header_still_make_a_cut_traceback():
    log = ('  File "/env/site-packages/transformer_engine/common/__init__.py", line 250, in _load_cudnn\n'
           '    libs = subprocess.check_output(\n'
           '  File "/env/lib/python3.10/subprocess.py", line 420, in check_output\n')
    root = extract(log)
    # the subprocess frame is plumbing: the caller that ran it is what failed
    assert root.failed and root.primary.kind == "traceback" and "_load_cudnn" in root.primary.text


def test_a_message_printed_after_its_header_belongs_to_it():
    log = ("Error: [19:55:28] /src/video/video_reader.cc:444: \n\n"
           "[BytesIO]Unable to handle EOF because it takes too long to retrieve last few frames\n")
    assert "Unable to handle EOF" in extract(log).primary.text


def test_an_exception_located_by_line_and_a_vendor_acl_code_are_failures():
    assert extract("ScannerError in line 58 of /work/snakesupport.py:\n  found character '\\t' that cannot start "
                   "any token\n").primary.kind == "exception"
    assert extract("[FATAL]  Acl return error kernels/attention.cc:140, with ERROR 561103\n").failed
    assert extract("\tsize mismatch for embed.bias: copying a param with shape torch.Size([1920]) from checkpoint, "
                   "the shape in current model is torch.Size([1024]).\n").failed


LAZY_IMPORT = """Traceback (most recent call last):
  File "/env/lib/python3.11/site-packages/transformers/utils/import_utils.py", line 1500, in _get_module
    return importlib.import_module("." + module_name, self.__name__)
  File "/env/lib/python3.11/importlib/__init__.py", line 126, in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
ModuleNotFoundError: No module named 'somekernel_cuda'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/train.py", line 3, in <module>
    from transformers import Trainer
RuntimeError: Failed to import transformers.trainer because of the following error (look up to see its traceback):
No module named 'somekernel_cuda'"""


def test_a_chained_exception_is_decided_by_its_first_link():
    root = extract(LAZY_IMPORT)
    assert root.primary.text == "ModuleNotFoundError: No module named 'somekernel_cuda'"


def test_a_lazy_import_wrapper_yields_the_error_it_re_raised():
    only_outer = LAZY_IMPORT.split("The above exception")[1]  # the excerpt kept only the re-raise
    root = extract(only_outer)
    assert root.primary.text == "No module named 'somekernel_cuda'" and not root.primary.wrapper
    assert any(s.wrapper and "look up to see its traceback" in s.text for s in root.signals)


def test_a_cut_traceback_ending_in_subprocess_names_its_caller_and_torchrun_alone_is_a_wrapper():
    cut = """Traceback (most recent call last):
  File "/x/pkg/loader.py", line 40, in _find_lib
    out = subprocess.check_output(["ldconfig", "-p"])
  File "/usr/lib/python3.10/subprocess.py", line 420, in check_output
    return run(*popenargs, stdout=PIPE, timeout=timeout, check=True,"""
    root = extract(cut)
    assert root.failed and root.primary.text == 'File "/x/pkg/loader.py", line 40, in _find_lib'
    launcher = """Traceback (most recent call last):
  File "/env/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/env/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError("""
    assert not extract(launcher).failed  # torchrun's own frames say a child failed, not why


def test_exit_status_messages_are_wrappers_and_launcher_lines_do_not_continue_a_message():
    root = extract("Exception: could not parse the file\n"
                   "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 7)\n"
                   "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.")
    assert root.primary.text == "Exception: could not parse the file"
    assert not extract("RuntimeError: Command 'python train.py' returned non-zero exit status 1.").failed


@pytest.mark.parametrize("line, kind", [
    ("Loss is nan, stopping training", "nonfinite"),
    (" [Errno 2] No such file or directory: 'data/train.json'", "error_line"),
])
def test_more_failure_lines(line, kind):
    root = extract(line)
    assert root.failed and root.primary.kind == kind


def test_a_traceback_flattened_onto_one_line_is_read_from_its_exception():
    root = extract('(module) File "/x/a.py", line 3, in f return g() File "/x/b.py", line 9, in g return h() '
                   'RuntimeError: kernel failed on device 0')
    assert root.primary.text == "RuntimeError: kernel failed on device 0"


def test_code_path_says_whose_code_the_decisive_traceback_passes_through():
    """The frames of the decisive traceback by file location: the error raised in an installed package, the
    innermost frame outside the packages (the code that called it), and the packages passed through."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 12, in <module>\n'
        "    main()\n"
        '  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 2240, in train\n'
        "    return inner_training_loop(\n"
        '  File "/home/u/proj/src/my_trainer.py", line 673, in training_step\n'
        "    x = model.device\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1940, in __getattr__\n'
        "    raise AttributeError(\n"
        "AttributeError: 'MyWrapper' object has no attribute 'device'\n")
    path = extract(log).code_path
    assert path.startswith("raised in library torch (/opt/conda/lib/python3.10/site-packages/torch/nn/modules/"
                           "module.py line 1940 in __getattr__)")
    assert "innermost frame outside installed packages: code outside installed packages " \
           "(/home/u/proj/src/my_trainer.py line 673 in training_step)" in path
    assert path.endswith("installed packages passed through: transformers, torch")


def test_code_path_names_remote_code_and_says_when_only_packages_are_shown():
    remote = ('  File "/root/.cache/huggingface/modules/transformers_modules/m/modeling_m.py", line 9, in forward\n'
              "    h = self.proj(x)\n"
              "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x2)\n")
    assert extract(remote).code_path.startswith("raised in remote code (")
    cut = ('  File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 90, in backward\n'
           "    allow_unreachable=True)\n"
           "RuntimeError: one of the variables needed for gradient computation has been modified\n")
    assert "the frames shown are all installed packages / stdlib" in extract(cut).code_path
    assert extract("RuntimeError: no traceback at all\n").code_path == ""


def test_the_llm_evidence_carries_the_code_path():
    from msmigrate.agent.nodes.classify import llm_evidence
    from msmigrate.knowledge.classifier import classify
    log = ('  File "/srv/app/model_code.py", line 3, in forward\n    y = f(x)\n'
           "ZeroDivisionError: float division by zero in an unusual layer\n")
    evidence = llm_evidence("G4", classify(log))
    assert evidence["root_cause"]["code_path"].startswith("raised in code outside installed packages (/srv/app/")


@pytest.mark.parametrize("path, origin", [
    (r"C:\Users\u\AppData\Local\Temp\pip-install-b2x6ss0o\deepspeed_2753f7a76eb54d1cac6a73f0b995\setup.py",
     "library deepspeed (installed from source by pip)"),
    ("/tmp/pip-install-k9/flash-attn_0123456789abcdef0123456789abcdef/setup.py",
     "library flash-attn (installed from source by pip)"),
    ("/tmp/pip-req-build-abc123/setup.py", "library (unnamed) (installed from source by pip)"),
    ("/home/u/.virtualenvs/train/src/mypkg/core.py", "library mypkg (installed from source by pip)"),
    ("/usr/local/Miniconda3/envs/py310/bin/torchrun", "an installed console script"),
    ("/opt/conda/bin/deepspeed", "an installed console script"),
    ("/usr/lib64/python3.11/ctypes/__init__.py", "stdlib"),
    (r"C:\Python310\Lib\subprocess.py", "stdlib"),
    ("/home/u/proj/bin/train.py", "code outside installed packages"),  # a script the user keeps in bin/
    ("/home/u/proj/pipelines/build.py", "code outside installed packages"),
])
def test_frame_origin_knows_pip_builds_console_scripts_and_other_stdlib_layouts(path, origin):
    """A package pip builds from source, a launcher stub in an environment's bin/ and a stdlib under lib64/ or a
    Windows Lib/ are not the run's own code, though no site-packages is in their paths."""
    from msmigrate.knowledge.root_cause import frame_origin
    assert frame_origin(path) == origin


def test_a_collective_error_after_a_process_died_of_its_own_error_does_not_decide():
    """Interleaved output of several processes without rank prefixes: the collective error the surviving
    processes print is the consequence; the earlier error of the process that died decides."""
    log = ("Traceback (most recent call last):\n"
           '  File "/w/train.py", line 40, in <module>\n'
           "    cfg = TrainConfig(**raw)\n"
           "pydantic_core._pydantic_core.ValidationError: 1 validation error for TrainConfig\n"
           "lr\n"
           "  Input should be a valid number [type=float_parsing, input_value='1e-4x', input_type=str]\n"
           "Traceback (most recent call last):\n"
           '  File "/w/train.py", line 52, in <module>\n'
           "    dist.barrier()\n"
           "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or "
           "there was a network error\n")
    assert extract(log).primary.text.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error")
    alone = log.split("Traceback", 2)[2]  # the collective error with no other error: it decides
    assert "DistBackendError" in extract("Traceback" + alone).primary.text


def test_a_cut_traceback_ending_in_a_raise_statement_with_a_literal_message_says_what_was_raised():
    cut = ('  File "/env/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 631, in __next__\n'
           "    data = self._next_data()\n"
           "raise ValueError('Please check if the max_length is appropriate.')\n")
    root = extract(cut)
    assert (root.primary.kind, root.primary.text) == ("exception", "ValueError: Please check if the max_length is "
                                                                   "appropriate.")
    assert root.code_path.startswith("raised in library torch (")  # the frames stay the exception's
    carets = 'Traceback (most recent call last):\n  File "/w/a.py", line 3, in f\n    raise KeyError("no x")\n    ^^^^\n'
    assert extract(carets).primary.text == "KeyError: no x"
    # a formatted message is not the message that was raised: the traceback stays cut
    formatted = 'Traceback (most recent call last):\n  File "/w/a.py", line 3, in f\n    raise ValueError(f"bad {x}")\n'
    assert extract(formatted).primary.kind == "traceback"
    # with its exception line, that line decides, not the raise statement
    complete = formatted + "ValueError: bad 3\n"
    assert extract(complete).primary.text == "ValueError: bad 3"


@pytest.mark.parametrize("line", ["cannot import name 'EncoderDecoderCache' from 'transformers'",
                                  "No module named 'flash_attn'"])
def test_the_import_systems_messages_without_their_class_are_exceptions(line):
    root = extract('  File "/w/train.py", line 2, in <module>\n    import x\n' + line + "\n")
    assert (root.primary.kind, root.primary.text) == ("exception", line)
    assert not extract("WARNING 03-20 02:24:17 ops.py:19] Failed to import with ModuleNotFoundError(\"No module "
                       "named 'vllm._C'\")\n").failed


def test_an_nccl_warn_line_naming_a_system_error_is_a_failure_and_routine_warn_notices_are_not():
    root = extract("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n")
    assert root.failed and root.primary.kind == "collective"
    quiet = extract("node1:12:34 [0] NCCL WARN Failed to open libibverbs.so[.1]\nstep 1 loss 2.0\n")
    assert not quiet.failed and quiet.warnings


def test_the_launch_command_before_the_decisive_signal_is_kept_with_its_continuation_lines():
    log = ("(base) root@node:/w# NPROC=8 torchrun --nproc_per_node 8 \\\n"
           "    train.py --bf16 \\\n"
           "    --deepspeed ds_z3.json\n"
           "loading model\n"
           "Traceback (most recent call last):\n"
           '  File "/w/train.py", line 3, in <module>\n'
           "ValueError: bad thing\n"
           "python train.py --retry\n")  # after the error: not the command that failed
    assert extract(log).command == ("(base) root@node:/w# NPROC=8 torchrun --nproc_per_node 8 \\ train.py --bf16 "
                                    "\\ --deepspeed ds_z3.json")
    assert extract("$ python -m llamafactory.cli train x.yaml\nRuntimeError: x\n").command == \
        "$ python -m llamafactory.cli train x.yaml"
    for prose in ("the python package is odd\n", "python version: 3.10\n", "Python 3.10.12\n"):
        assert extract(prose + "RuntimeError: x\n").command == ""


def test_the_llm_evidence_carries_the_launch_command():
    from msmigrate.agent.nodes.classify import llm_evidence
    from msmigrate.knowledge.classifier import classify
    log = "accelerate launch --num_processes 2 sft.py --bf16\nZeroDivisionError: float division by zero here\n"
    assert llm_evidence("G4", classify(log))["root_cause"]["command"] == \
        "accelerate launch --num_processes 2 sft.py --bf16"


@pytest.mark.parametrize("line", [
    "MyProcessor.__init__() got an unexpected keyword argument 'image_token'",
    "forward() missing 1 required positional argument: 'mask'",
    "Block.forward() takes 2 positional arguments but 3 were given",
    "collate() takes from 1 to 2 positional arguments but 4 were given",
    "```build() got multiple values for argument 'config'```",
])
def test_a_bare_call_type_error_is_an_exception(line):
    """Python's fixed TypeError messages for a bad call are failures even when pasted without "TypeError:"."""
    root = extract(line)
    assert root.failed and root.primary.kind == "exception"
    assert root.primary.text == line.strip("`")


@pytest.mark.parametrize("line", [
    "[INFO] forward() missing 1 required positional argument: 'mask' is handled by the wrapper",
    "The docs say f() takes 2 positional arguments but 3 were given in old releases",
])
def test_call_error_words_in_an_info_line_or_prose_are_no_failure(line):
    assert not extract(line).failed


def test_a_frame_with_its_exception_joined_on_one_line_is_read_from_the_exception():
    joined = extract('Traceback (most recent call last):\n'
                     '  File "/x/a.py", line 3, in run RuntimeError: device lost while copying\n')
    assert joined.primary.kind == "exception" and joined.primary.text == "RuntimeError: device lost while copying"
    # a function whose name ends in Error is not an exception: the frame stays a frame
    named = extract('Traceback (most recent call last):\n  File "/x/a.py", line 3, in raise_Error\n'
                    '    raise ValueError("bad")\nValueError: bad\n')
    assert named.primary.text == "ValueError: bad"


def test_fence_quotes_around_a_pasted_line_are_not_part_of_the_message():
    assert extract('```RuntimeError: boom on rank 0```').primary.text == "RuntimeError: boom on rank 0"
    assert extract('ValueError: bad value for x"""').primary.text == "ValueError: bad value for x"
    assert extract("KeyError: 'pixel_values'").primary.text == "KeyError: 'pixel_values'"  # a quote that belongs


def test_a_shortened_path_of_an_installed_package_is_that_package():
    log = ('Traceback (most recent call last):\n'
           '  File ".../myproject/train.py", line 40, in step\n'
           '  File ".../torch/distributed/tensor/_redistribute.py", line 5, in redistribute\n'
           'RuntimeError: placement mismatch\n')
    path = extract(log).code_path
    assert path.startswith("raised in library torch (.../torch/distributed/tensor/_redistribute.py line 5")
    assert "innermost frame outside installed packages: code outside installed packages (.../myproject/train.py" \
        in path


@pytest.mark.parametrize("line, message", [
    ("Node VisionEncode: 'Gemma3Processor' object has no attribute 'boi_token'",
     "'Gemma3Processor' object has no attribute 'boi_token'"),
    ("module 'torch_npu' has no attribute 'npu_rotary_mul'", "module 'torch_npu' has no attribute 'npu_rotary_mul'"),
    ("type object 'MyCollator' has no attribute 'pad_id'", "type object 'MyCollator' has no attribute 'pad_id'"),
])
def test_a_bare_attribute_error_is_an_exception_from_where_its_message_starts(line, message):
    root = extract(line)
    assert root.failed and root.primary.kind == "exception" and root.primary.text == message


@pytest.mark.parametrize("line", [
    "UserWarning: 'Config' object has no attribute 'rope_scaling'; using the default",
    "[INFO] 'Trainer' object has no attribute 'accelerator' is expected before setup",
    "[W compat.py:12] module 'torch' has no attribute 'npu'; running on CPU",
])
def test_attribute_error_words_in_a_warning_or_info_line_are_no_failure(line):
    assert not extract(line).failed


def test_a_launch_command_after_the_error_is_not_part_of_its_message():
    for command in ("NCCL_DEBUG=INFO torchrun --nproc_per_node=8 finetune.py \\", "python3 train.py --seq_len 4096",
                    "deepspeed --num_gpus 8 run.py --zero 3", "  --per_device_train_batch_size 4 \\"):
        root = extract(f"RuntimeError: CUDA error: an illegal memory access was encountered\n{command}\n"
                       "  --learning_rate 1e-5\n")
        assert root.primary.text == "RuntimeError: CUDA error: an illegal memory access was encountered", command
    # a sentence that continues the message still does
    kept = extract("ValueError: the batch has 3 images\nbut the prompt names 2 image tokens\n")
    assert kept.primary.text == "ValueError: the batch has 3 images but the prompt names 2 image tokens"


def test_an_exception_quoted_in_backticks_inside_a_sentence_is_the_quoted_message():
    root = extract("`RuntimeError: expected all tensors on npu:0` when resuming with FSDP2 and LoRA.")
    assert root.primary.text == "RuntimeError: expected all tensors on npu:0"
    # a quoted part that is no exception changes nothing: the line is read as before
    assert extract("`foo` is used as ValueError: x in docs").primary.text == "`foo` is used as ValueError: x in docs"


@pytest.mark.parametrize("line", [
    "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 3",
    "mat1 and mat2 shapes cannot be multiplied (1x2 and 6x64)",
    "shape '[2, -1, 7168]' is invalid for input of size 7168",
    "undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "/opt/lib/libfoo.so.1: cannot open shared object file: No such file or directory",
    "/lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by /opt/x/_C.so)",
])
def test_a_fixed_shape_runtime_message_without_its_class_is_an_exception(line):
    root = extract(f"step 10 ok\n{line}\n")
    assert root.failed and root.primary.kind == "exception" and root.primary.text == line


@pytest.mark.parametrize("line", [
    "UserWarning: mat1 and mat2 shapes cannot be multiplied; falling back to the slow path",
    "[INFO] checked: undefined symbol: none missing",
    "WARNING libfoo.so.1: cannot open shared object file, the optional plugin is skipped",
])
def test_fixed_shape_runtime_words_in_a_warning_or_info_line_are_no_failure(line):
    assert not extract(line).failed


def test_a_device_side_assert_names_the_kernel_assertion_printed_before_it():
    log = ("../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [126,0,0], thread: "
           "[32,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
           "Traceback (most recent call last):\n  File \"/x/train.py\", line 3, in <module>\n"
           "RuntimeError: CUDA error: device-side assert triggered\n")
    root = extract(log)
    assert root.primary.text.startswith("RuntimeError: CUDA error: device-side assert triggered (the kernel "
                                        "assertion printed before it: ")
    assert "srcIndex < srcSelectDimSize" in root.primary.text
    # without an assertion line the message stays as it is
    alone = extract("RuntimeError: CUDA error: device-side assert triggered\n")
    assert alone.primary.text == "RuntimeError: CUDA error: device-side assert triggered"


@pytest.mark.parametrize("line", [
    "Indexing.cu:1292: indexSelectLargeIndex: block: [126,0,0], thread: [32,0,0] Assertion `srcIndex < srcSelectDim",
    "Segmentation fault",
    "Aborted (core dumped)",
])
def test_a_kernel_assertion_cut_before_failed_and_a_native_crash_are_failure_lines(line):
    root = extract(line)
    assert root.failed and root.primary.kind in ("error_line", "ascend")


def test_an_error_line_beats_a_traceback_cut_before_its_exception_and_keeps_its_code_path():
    log = ("[10:21:05] video_reader.cc:83: ERROR opening: /data/v/clip_001.mp4, Invalid data found when processing "
           "input\n"
           "Traceback (most recent call last):\n"
           '  File "/home/u/proj/train.py", line 315, in __getitem__\n'
           "    video =\n")
    root = extract(log)
    assert root.primary.kind == "error_line" and "ERROR opening" in root.primary.text
    assert root.code_path.startswith("raised in code outside installed packages (/home/u/proj/train.py line 315")
    # a cut traceback alone is still the root cause
    alone = extract(log.split("\n", 1)[1])
    assert alone.primary.kind == "traceback"


def test_a_cmake_error_is_the_root_cause_its_setup_wrapper_hides():
    log = ("  CMake Error at cmake/FindThing.cmake:19 (find_library):\n"
           "    Could not find thing_LIBRARY using the following names: thing, libthing.so.\n"
           "  -- Configuring incomplete, errors occurred!\n"
           "Traceback (most recent call last):\n"
           '  File "/src/pkg/setup.py", line 336, in _build\n'
           "    subprocess.run(command, cwd=build_dir, check=True)\n"
           "subprocess.CalledProcessError: Command '['cmake', '-S', 'src']' returned non-zero exit status 1.\n")
    root = extract(log)
    assert root.primary.kind == "error_line" and "Could not find thing_LIBRARY" in root.primary.text
    # a build log's status lines that merely name CMake are no failure
    assert not extract("-- The CMake Error handling module was found\n-- Build files written\n").failed


def test_a_warning_reporting_out_of_memory_decides_only_when_nothing_else_failed():
    warned = ("/site-packages/torch/distributed/fsdp/api.py:2224: UserWarning: Failed to clone() tensor with name "
              "lm_head.weight. Error: CUDA out of memory. Tried to allocate 502.00 MiB (GPU 1; 39.59 GiB total)\n")
    root = extract(warned)
    assert root.failed and root.primary.kind == "oom" and "Tried to allocate" in root.primary.text
    later = extract(warned + "ValueError: labels and logits differ in length\n")
    assert later.primary.kind == "exception" and later.primary.text.startswith("ValueError")
    # an ordinary warning is still no failure
    assert not extract("UserWarning: TypedStorage is deprecated. It will be removed in the future\n").failed
