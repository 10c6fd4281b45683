"""The keys LLaMA-Factory accepts in a training YAML (and as `llamafactory-cli train X.yaml key=value` overrides), as
data: llamafactory 0.9.5 (the PyPI wheel llamafactory-0.9.5-py3-none-any.whl) parses the YAML with
HfArgumentParser([ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments])
.parse_dict(args, allow_extra_keys=False) (hparams/parser.py _TRAIN_ARGS, _parse_train_args), so any other key stops
it before training ("Some keys are not used by the HfArgumentParser"), unless the environment sets ALLOW_EXTRA_ARGS=1
(or USE_MCA=1, which swaps in mcore_adapter's TrainingArguments).

Read from the wheel's dataclass field names (field(init=False) ones excluded, as parse_dict does); TrainingArguments
extends transformers' Seq2SeqTrainingArguments, whose fields are the union over transformers 4.55.0, 4.57.6, 5.0.0
and 5.6.0 (training_args.py, training_args_seq2seq.py; llamafactory 0.9.5 requires transformers >=4.55.0,<=5.6.0),
so a key some supported release takes is never refused. Not imported at run time: regenerate from a newer wheel
when LLaMA-Factory adds keys. planner.files.finetune_yaml_read refuses a key outside KEYS.
"""

from __future__ import annotations

VERSION = "llamafactory 0.9.5"
TRANSFORMERS_VERSIONS = ("4.55.0", "4.57.6", "5.0.0", "5.6.0")

# hparams/model_args.py ModelArguments and its bases (BaseModelArguments, QuantizationArguments, ProcessorArguments,
# ExportArguments, VllmArguments, SGLangArguments, KTransformersArguments); init=False fields left out
MODEL_ARGUMENTS = (
    "adapter_folder", "adapter_name_or_path", "add_special_tokens", "add_tokens", "audio_sampling_rate", "cache_dir",
    "crop_to_patches", "disable_gradient_checkpointing", "double_quantization", "enable_liger_kernel", "export_device",
    "export_dir", "export_hub_model_id", "export_legacy_format", "export_quantization_bit",
    "export_quantization_dataset", "export_quantization_maxlen", "export_quantization_nsamples", "export_size",
    "flash_attn", "hf_hub_token", "image_do_pan_and_scan", "image_max_pixels", "image_min_pixels", "infer_backend",
    "infer_dtype", "init_special_tokens", "kt_expert_checkpoint_path", "kt_lora_expert_intermediate_size",
    "kt_lora_expert_num", "kt_use_lora_experts", "kt_weight_path", "low_cpu_mem_usage", "mixture_of_depths",
    "model_name_or_path", "model_revision", "moe_aux_loss_coef", "ms_hub_token", "new_special_tokens_config",
    "offload_folder", "om_hub_token", "print_param_status", "quantization_bit", "quantization_device_map",
    "quantization_method", "quantization_type", "resize_vocab", "rope_scaling", "sglang_config", "sglang_lora_backend",
    "sglang_maxlen", "sglang_mem_fraction", "sglang_tp_size", "shift_attn", "split_special_tokens",
    "train_from_scratch", "trust_remote_code", "upcast_layernorm", "upcast_lmhead_output", "use_audio_in_video",
    "use_fast_tokenizer", "use_kt", "use_kv_cache", "use_reentrant_gc", "use_unsloth", "use_unsloth_gc",
    "use_v1_kernels", "video_fps", "video_max_pixels", "video_maxlen", "video_min_pixels", "vllm_config",
    "vllm_enforce_eager", "vllm_gpu_util", "vllm_max_lora_rank", "vllm_maxlen"
)

# hparams/data_args.py DataArguments
DATA_ARGUMENTS = (
    "buffer_size", "cutoff_len", "data_shared_file_system", "dataset", "dataset_dir", "default_system",
    "enable_thinking", "eval_dataset", "eval_num_beams", "eval_on_each_dataset", "ignore_pad_token_for_loss",
    "interleave_probs", "mask_history", "max_samples", "media_dir", "mix_strategy", "neat_packing", "overwrite_cache",
    "packing", "preprocessing_batch_size", "preprocessing_num_workers", "preserve_thinking", "streaming", "template",
    "tokenized_path", "tool_format", "train_on_prompt", "val_size"
)

# hparams/finetuning_args.py FinetuningArguments and its bases (FreezeArguments, LoraArguments, OFTArguments,
# RLHFArguments, GaloreArguments, ApolloArguments, BAdamArgument, SwanLabArguments)
FINETUNING_ARGUMENTS = (
    "additional_target", "apollo_layerwise", "apollo_proj", "apollo_proj_type", "apollo_rank", "apollo_scale",
    "apollo_scale_front", "apollo_scale_type", "apollo_target", "apollo_update_interval", "asft_alpha",
    "badam_mask_mode", "badam_mode", "badam_start_block", "badam_switch_interval", "badam_switch_mode",
    "badam_update_ratio", "badam_verbose", "compute_accuracy", "create_new_adapter", "disable_shuffling",
    "dpo_label_smoothing", "eaft_alpha", "early_stopping_steps", "finetuning_type", "freeze_extra_modules",
    "freeze_language_model", "freeze_multi_modal_projector", "freeze_trainable_layers", "freeze_trainable_modules",
    "freeze_vision_tower", "galore_layerwise", "galore_proj_type", "galore_rank", "galore_scale", "galore_target",
    "galore_update_interval", "hyper_parallel_args", "include_effective_tokens_per_second", "kto_chosen_weight",
    "kto_rejected_weight", "ld_alpha", "lora_alpha", "lora_dropout", "lora_rank", "lora_target",
    "loraplus_lr_embedding", "loraplus_lr_ratio", "module_dropout", "oft_block_size", "oft_rank", "oft_target",
    "pissa_convert", "pissa_init", "pissa_iter", "plot_loss", "ppo_buffer_size", "ppo_epochs", "ppo_score_norm",
    "ppo_target", "ppo_whiten_rewards", "pref_bco_weight", "pref_beta", "pref_ftx", "pref_loss", "pure_bf16",
    "ref_model", "ref_model_adapters", "ref_model_quantization_bit", "reward_model", "reward_model_adapters",
    "reward_model_quantization_bit", "reward_model_type", "simpo_gamma", "stage", "swanlab_api_key",
    "swanlab_lark_secret", "swanlab_lark_webhook_url", "swanlab_logdir", "swanlab_mode", "swanlab_project",
    "swanlab_run_name", "swanlab_workspace", "use_adam_mini", "use_apollo", "use_asft_loss", "use_badam",
    "use_dft_loss", "use_dora", "use_eaft_loss", "use_galore", "use_hyper_parallel", "use_llama_pro", "use_mca",
    "use_muon", "use_rslora", "use_swanlab"
)

# hparams/generating_args.py GeneratingArguments
GENERATING_ARGUMENTS = (
    "do_sample", "length_penalty", "max_length", "max_new_tokens", "num_beams", "repetition_penalty",
    "skip_special_tokens", "temperature", "top_k", "top_p"
)

# hparams/training_args.py TrainingArguments' own fields (RayArguments, ProfilerArguments, Fp8Arguments,
# overwrite_output_dir), over transformers' Seq2SeqTrainingArguments
TRAINING_ARGUMENTS = (
    "enable_torch_profiler", "fp8", "fp8_backend", "fp8_enable_fsdp_float8_all_gather", "master_addr", "master_port",
    "overwrite_output_dir", "profile_modules", "profiler_active_steps", "profiler_output_dir",
    "profiler_profile_memory", "profiler_record_shapes", "profiler_repeat", "profiler_wait_steps",
    "profiler_warmup_steps", "profiler_with_stack", "ray_init_kwargs", "ray_num_workers"
)

# transformers Seq2SeqTrainingArguments (TrainingArguments and its generation fields), union over
# TRANSFORMERS_VERSIONS
TRANSFORMERS = (
    "accelerator_config", "adafactor", "adam_beta1", "adam_beta2", "adam_epsilon", "auto_find_batch_size",
    "average_tokens_across_devices", "batch_eval_metrics", "bf16", "bf16_full_eval", "data_seed",
    "dataloader_drop_last", "dataloader_num_workers", "dataloader_persistent_workers", "dataloader_pin_memory",
    "dataloader_prefetch_factor", "ddp_backend", "ddp_broadcast_buffers", "ddp_bucket_cap_mb",
    "ddp_find_unused_parameters", "ddp_static_graph", "ddp_timeout", "debug", "deepspeed", "disable_tqdm", "do_eval",
    "do_predict", "do_train", "enable_jit_checkpoint", "eval_accumulation_steps", "eval_delay",
    "eval_do_concat_batches", "eval_on_start", "eval_steps", "eval_strategy", "eval_use_gather_object", "fp16",
    "fp16_backend", "fp16_full_eval", "fp16_opt_level", "fsdp", "fsdp_config", "fsdp_min_num_params",
    "fsdp_transformer_layer_cls_to_wrap", "full_determinism", "generation_config", "generation_max_length",
    "generation_num_beams", "gradient_accumulation_steps", "gradient_checkpointing", "gradient_checkpointing_kwargs",
    "greater_is_better", "group_by_length", "half_precision_backend", "hub_always_push", "hub_model_id",
    "hub_private_repo", "hub_revision", "hub_strategy", "hub_token", "ignore_data_skip", "include_for_metrics",
    "include_inputs_for_metrics", "include_num_input_tokens_seen", "include_tokens_per_second", "jit_mode_eval",
    "label_names", "label_smoothing_factor", "learning_rate", "length_column_name", "liger_kernel_config",
    "load_best_model_at_end", "local_rank", "log_level", "log_level_replica", "log_on_each_node", "logging_dir",
    "logging_first_step", "logging_nan_inf_filter", "logging_steps", "logging_strategy", "lr_scheduler_kwargs",
    "lr_scheduler_type", "max_grad_norm", "max_steps", "metric_for_best_model", "mp_parameters", "neftune_noise_alpha",
    "no_cuda", "num_train_epochs", "optim", "optim_args", "optim_target_modules", "output_dir", "overwrite_output_dir",
    "parallelism_config", "past_index", "per_device_eval_batch_size", "per_device_train_batch_size",
    "per_gpu_eval_batch_size", "per_gpu_train_batch_size", "predict_with_generate", "prediction_loss_only", "project",
    "push_to_hub", "push_to_hub_model_id", "push_to_hub_organization", "push_to_hub_token", "ray_scope",
    "remove_unused_columns", "report_to", "restore_callback_states_from_checkpoint", "resume_from_checkpoint",
    "run_name", "save_on_each_node", "save_only_model", "save_safetensors", "save_steps", "save_strategy",
    "save_total_limit", "seed", "skip_memory_metrics", "sortish_sampler", "tf32", "torch_compile",
    "torch_compile_backend", "torch_compile_mode", "torch_empty_cache_steps", "torchdynamo", "tpu_metrics_debug",
    "tpu_num_cores", "trackio_bucket_id", "trackio_space_id", "trackio_static_space_id", "train_sampling_strategy",
    "use_cache", "use_cpu", "use_ipex", "use_legacy_prediction_loop", "use_liger_kernel", "use_mps_device",
    "warmup_ratio", "warmup_steps", "weight_decay"
)

KEYS = frozenset(MODEL_ARGUMENTS + DATA_ARGUMENTS + FINETUNING_ARGUMENTS + GENERATING_ARGUMENTS + TRAINING_ARGUMENTS
                 + TRANSFORMERS)

__all__ = ["KEYS", "TRANSFORMERS_VERSIONS", "VERSION"]
