"""The FSDP2 plugin route: a model plugin, an mm_plugin / collator and a YAML for MindSpeed-MM's FSDP2 trainer."""
