"""A file the host keeps from being read is the host's, whatever setting names its folder (``knowledge/host_files.py``
through ``failure_context.context_owner``); a setting that names a path that is not there stays the setting's."""

from __future__ import annotations

from msmigrate.knowledge.classifier import classify
from msmigrate.knowledge.failure_context import Artifacts, context_owner
from msmigrate.knowledge.host_files import host_file_error

ART = Artifacts(config=("examples/m/m_config.yaml",), yaml_keys={"load": "training.load"},
                yaml_values={"training.load": "/data/src"})
LOAD = ("the target's own HF weight load (hf_utils.load_hf_checkpoint, training.load /data/src, load_strict False) "
        "failed on the plugin class: SafetensorError: {error}")


def test_an_operation_the_file_system_refuses_is_the_hosts_not_the_setting_that_names_the_folder():
    text = LOAD.format(error="Error while mmapping the file: No such device (os error 19)")
    verdict = context_owner(text, ART)
    assert (verdict.owner, verdict.rule) == ("environment", "host") and "ENODEV" in verdict.reason
    assert "local disk" in verdict.reason
    assert "EIO" in host_file_error("OSError: [Errno 5] Input/output error: '/data/src/model.safetensors'")


def test_a_dangling_link_is_named_and_a_path_that_is_not_there_stays_the_settings(tmp_path):
    (tmp_path / "snap").mkdir()
    link = tmp_path / "snap" / "model.safetensors"
    link.symlink_to(tmp_path / "blobs" / "0a1b2c")
    text = LOAD.format(error=f"No such file or directory (os error 2): {link}")
    verdict = context_owner(text, ART)
    assert verdict.owner == "environment" and str(tmp_path / "blobs" / "0a1b2c") in verdict.reason
    assert "cp -rL" in verdict.reason
    missing = LOAD.format(error=f"No such file or directory (os error 2): {tmp_path / 'elsewhere' / 'x.safetensors'}")
    assert host_file_error(missing) is None
    assert context_owner(missing, ART).owner == "config"  # the setting names it (training.load): its fix


def test_a_weights_file_cut_short_is_the_hosts_copy():
    text = LOAD.format(error="Error while deserializing header: incomplete metadata, file not fully covered")
    verdict = context_owner(text, ART)
    assert verdict.owner == "environment" and "copy it again" in verdict.reason


def test_an_address_family_the_host_lacks_is_not_a_port_in_use():
    text = ("RuntimeError: The server socket has failed to listen on any local network address. port: 56317, "
            "useIpv6: 1, code: -97, name: EAFNOSUPPORT, message: address family not supported by protocol")
    verdict = classify(text)
    assert (verdict.case_id, verdict.owner) == ("rendezvous-address-family", "environment")
    busy = ("RuntimeError: The server socket has failed to listen on any local network address. port: 6000, "
            "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    assert classify(busy).case_id == "rendezvous-port-in-use"

