// Every setting of `adgnn train`, declared once. The command line (launch/train_commands.cpp),
// YAML configs and sweep grids (apply_yaml), the configuration line (describe(): the checkpoint
// fingerprint and the sweep key) and to_yaml() all walk this one list, so a setting cannot be
// forgotten in one of them (tests/trainer/test_settings.cpp checks each way).
#pragma once

#include "adgnn/trainer.h"

namespace adgnn {

struct Setting {
  // Whether the setting is in the configuration line (describe()).
  enum class Line {
    Always,
    UnlessDefault,  // only when not at its default: the lines of runs made before it stay valid
    Never,          // does not change the numbers (where data lives, threads, outputs)
  };
  // How it is set.
  enum class Source {
    Option,      // --flag value, and the YAML key
    Switch,      // --flag without a value (true when given), and the YAML key
    YamlOnly,    // the YAML key; the command line sets it its own way (a comma-separated list)
    TestsOnly,   // neither: diagnostics that tests set in code (still in the line)
  };
  const char* key;   // the YAML key and the name in the configuration line
  const char* flag;  // CLI11 option name(s), e.g. "--hidden" or "--dataset,-d"; "" if none
  const char* help;
  Line line;
  Source source;
};

// Calls visit(setting, member...) for every setting, with the member of each of the
// configurations given (one or more TrainConfig, all of the same constness). The order is the
// configuration line's, then --help's.
template <class Visit, class... Config>
void for_each_setting(Visit&& visit, Config&... c) {
  using L = Setting::Line;
  using S = Setting::Source;
  visit(Setting{"model", "", "Backbone: gcn, gat, sage, mixhop, gatv2, dirgnn", L::Always, S::YamlOnly},
        c.model.backbone...);
  visit(Setting{"variant", "", "plain, ad, ad_fast, ad_sharp (AD#)", L::Always, S::YamlOnly}, c.model.variant...);
  visit(Setting{"hidden", "--hidden", "Hidden width", L::Always, S::Option}, c.model.hidden...);
  visit(Setting{"layers", "--layers", "Number of layers (= t_max of the depth assignment)", L::Always, S::Option},
        c.model.layers...);
  visit(Setting{"dropout", "--dropout", "Dropout probability", L::Always, S::Option}, c.model.dropout...);
  visit(Setting{"batchnorm", "--batchnorm", "BatchNorm after hidden layers (true/false)", L::Always, S::Option},
        c.model.batchnorm...);
  visit(Setting{"heads", "--heads", "Attention heads of hidden GAT/GATv2 layers", L::Always, S::Option},
        c.model.heads...);
  visit(Setting{"lambda", "--lambda", "lambda of tau(t) = lambda + (1 - lambda) theta(t)", L::Always, S::Option},
        c.model.lambda...);
  visit(Setting{"kappa", "--kappa", "Temperature of the straight-through surrogate", L::Always, S::Option},
        c.model.kappa...);
  visit(Setting{"band", "--band", "Surrogate band |eps - tau| < band * kappa (<= 0: every row)", L::Always,
                S::Option},
        c.model.band...);
  visit(Setting{"normalisation", "--normalisation", "Depth-benefit normalisation: linear (paper), log, or rank (quantiles: depths spread evenly)",
                L::Always, S::Option},
        c.model.normalisation...);
  visit(Setting{"theta_init", "--theta-init", "Initial a_s of theta (with --depth-target: the target's thresholds)", L::Always, S::Option}, c.model.theta_init...);
  visit(Setting{"depth_target", "--depth-target",
                "AD: learn the thresholds towards a depth distribution: uniform, or layers+1 shares of depths "
                "0..layers (e.g. 0,0.5,0.3,0.2)",
                L::UnlessDefault, S::Option},
        c.model.depth_target...);
  visit(Setting{"depth_target_weight", "--depth-target-weight",
                "Weight of --depth-target's penalty sum_t (share reaching t - target's)^2", L::UnlessDefault,
                S::Option},
        c.model.depth_target_weight...);
  visit(Setting{"seed", "--seed", "Seed (run r uses seed + r)", L::Always, S::Option}, c.model.seed...);
  visit(Setting{"splits", "--splits", "auto, random, or a split family of the dataset (geom-gcn, platonov, public)",
                L::Always, S::Option},
        c.splits...);
  visit(Setting{"lr", "--lr", "Adam learning rate", L::Always, S::Option}, c.lr...);
  visit(Setting{"weight_decay", "--weight-decay", "Adam weight decay (theta excluded)", L::Always, S::Option},
        c.weight_decay...);
  visit(Setting{"patience", "--patience", "Early stopping patience in epochs (0: off)", L::Always, S::Option},
        c.patience...);
  visit(Setting{"metric", "--metric",
                "Selects the best epoch and sweep point, and is reported: auto (ROC AUC for binary Platonov "
                "datasets, else accuracy), accuracy, roc_auc, macro_f1",
                L::UnlessDefault, S::Option},
        c.metric...);
  visit(Setting{"float64", "", "Double-precision parameters (references)", L::Always, S::TestsOnly},
        c.model.float64...);
  visit(Setting{"soft_masks", "", "Soft masks in the forward pass (finite differences)", L::Always, S::TestsOnly},
        c.model.soft_masks...);
  visit(Setting{"t_max", "--t-max", "Exponent of the depth benefit (default: --layers)", L::Always, S::Option},
        c.model.t_max...);
  visit(Setting{"dirgnn_alpha", "--dirgnn-alpha", "DirGNN: alpha * outgoing-edge conv + (1 - alpha) * incoming-edge conv",
                L::Always, S::Option},
        c.model.dirgnn_alpha...);
  visit(Setting{"device", "--device", "cpu, cuda or cuda:N", L::Always, S::Option}, c.model.device...);
  visit(Setting{"heuristic", "--heuristic",
                "Same-label estimate of ad_fast / ad_sharp: degree (paper), common_neighbours, jaccard, "
                "adamic_adar, betweenness, kshell, clustering",
                L::UnlessDefault, S::Option},
        c.model.same_label_heuristic...);
  visit(Setting{"degree_threshold", "--degree-threshold",
                "Plain models: nodes with degree <= this never aggregate (Exp-2; 0: off)", L::UnlessDefault, S::Option},
        c.model.degree_threshold...);
  visit(Setting{"fdelta_precision", "--fdelta-precision",
                "AD (learned): f_delta's precision: fp32, tf32 or bf16 (tf32, bf16: faster, less precise; CUDA only)",
                L::UnlessDefault, S::Option},
        c.model.fdelta_precision...);
  visit(Setting{"precision", "--precision",
                "Activations' storage: fp32, or bf16 (features, layer outputs and halo rows in bfloat16, sums in "
                "float32: half the bytes a GPU step moves and holds; several times slower on the CPU)",
                L::UnlessDefault, S::Option},
        c.model.precision...);
  // The same numbers whatever their value.
  visit(Setting{"compact", "--compact",
                "AD: deeper layers read a compact input: auto (CPU only), on, off (fewer passes, more device waits)",
                L::Never, S::Option},
        c.model.compact_deep_layers...);
  visit(Setting{"compact_halo", "--compact-halo",
                "AD under mpirun: layers >= 2 hold only the halo rows they read: auto, on, off (docs/distributed.md)",
                L::Never, S::Option},
        c.model.compact_halo...);
  visit(Setting{"dataset", "--dataset,-d", "Same as the positional argument", L::Never, S::Option}, c.dataset...);
  visit(Setting{"data_dir", "--data-dir", "Folder holding the datasets (default: $ADGNN_DATA)", L::Never, S::Option},
        c.data_dir...);
  visit(Setting{"epochs", "--epochs", "Training epochs", L::Never, S::Option}, c.epochs...);
  visit(Setting{"runs", "--runs", "Runs (seeds and splits); reports mean +- std", L::Never, S::Option}, c.runs...);
  visit(Setting{"threads", "--threads", "Intra-op threads (0: all cores)", L::Never, S::Option}, c.threads...);
  visit(Setting{"run_workers", "--run-workers",
                "Runs trained concurrently, one thread each (one process; same results as --threads 1)", L::Never,
                S::Option},
        c.run_workers...);
  visit(Setting{"checkpoint", "--checkpoint", "HDF5 checkpoint file (written atomically)", L::Never, S::Option},
        c.checkpoint...);
  visit(Setting{"checkpoint_every", "--checkpoint-every", "Epochs between checkpoints", L::Never, S::Option},
        c.checkpoint_every...);
  visit(Setting{"resume", "--resume", "Continue from --checkpoint where it stopped", L::Never, S::Switch},
        c.resume...);
  visit(Setting{"metrics", "--metrics", "JSON-lines metrics file (one line per epoch)", L::Never, S::Option},
        c.metrics...);
  visit(Setting{"predictions", "--predictions", "HDF5 file for final logits, depths and embeddings", L::Never,
                S::Option},
        c.predictions...);
  visit(Setting{"layer_embeddings", "--layer-embeddings", "--predictions also holds every layer's output (layer_<t>)",
                L::Never, S::Switch},
        c.layer_embeddings...);
  visit(Setting{"profile", "--profile",
                "Folder for a step profile of run 0 (per rank: Markdown summary + Chrome trace)", L::Never, S::Option},
        c.profile...);
  visit(Setting{"profile_steps", "--profile-steps", "Training steps profiled: the last N epochs (default 3)",
                L::Never, S::Option},
        c.profile_steps...);
  visit(Setting{"partition", "--partition",
                "Several ranks: metis, stratified (balances every depth-benefit quartile), random, contiguous",
                L::Never, S::Option},
        c.partition.method...);
  visit(Setting{"objective", "--objective", "METIS objective: cut (edge cut) or vol (communication volume)",
                L::Never, S::Option},
        c.partition.objective...);
  visit(Setting{"partition_dir", "--partition-dir",
                "Several ranks: a folder made by `adgnn partition` (one file per rank)", L::Never, S::Option},
        c.partition_dir...);
}

}  // namespace adgnn
