// `adgnn data ...`: statistics, conversion to our HDF5 format, synthetic graphs, load benchmarks.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "CLI/CLI.hpp"
#include "adgnn/comm.h"
#include "adgnn/launch.h"
#include "adgnn/loaders.h"
#include "adgnn/partition.h"
#include "comm_process_group.h"
#include "commands.h"
#include "ranks.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "spdlog/spdlog.h"

namespace adgnn::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_gib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB on Linux
}

struct DatasetArgs {
  std::string positional, flag, data_dir;
  std::string pick() const {
    if (!positional.empty() && !flag.empty() && positional != flag)
      throw InputError(fmt::format("--dataset {}: conflicts with the positional dataset {}", flag,
                                   positional));
    const std::string d = flag.empty() ? positional : flag;
    if (d.empty()) throw InputError("--dataset: required (a name under --data-dir/ADGNN_DATA, or a path)");
    return d;
  }
};

void add_dataset_options(CLI::App* cmd, DatasetArgs& a) {
  cmd->add_option("dataset", a.positional, "Dataset name (under --data-dir or $ADGNN_DATA) or path");
  cmd->add_option("--dataset,-d", a.flag, "Same as the positional argument");
  cmd->add_option("--data-dir", a.data_dir, "Folder holding the datasets (default: $ADGNN_DATA)");
}

void check_output_path(const std::string& out, const std::string& flag) {
  namespace fs = std::filesystem;
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{} {}: folder {} does not exist", flag, out, dir.string()));
  if (fs::is_directory(p, ec)) throw InputError(fmt::format("{} {}: is a folder", flag, out));
}

}  // namespace

void add_data_commands(CLI::App& app, std::function<int()>& run) {
  auto* data = app.add_subcommand("data", "Datasets: statistics, conversion, synthetic graphs");
  data->require_subcommand(1);

  // ---- stats ----
  {
    auto* cmd = data->add_subcommand("stats", "Print a dataset's statistics (a table, or JSON)");
    auto args = std::make_shared<DatasetArgs>();
    auto json = std::make_shared<bool>(false);
    add_dataset_options(cmd, *args);
    cmd->add_flag("--json", *json, "Print JSON instead of a table");
    cmd->callback([&run, args, json] {
      run = [args, json] {
        const Graph g = load_dataset(args->pick(), args->data_dir);
        const GraphStats s = compute_stats(g);
        std::fputs((*json ? stats_json(g, s) + "\n" : stats_table(g, s)).c_str(), stdout);
        return 0;
      };
    });
  }

  // ---- convert ----
  {
    auto* cmd = data->add_subcommand("convert", "Write a dataset in our HDF5 graph format");
    auto args = std::make_shared<DatasetArgs>();
    auto out = std::make_shared<std::string>();
    auto opt = std::make_shared<H5WriteOptions>();
    add_dataset_options(cmd, *args);
    cmd->add_option("--out,-o", *out, "Output .h5 file (written atomically)")->required();
    cmd->add_option("--deflate", opt->deflate_level, "Deflate level 0-9 (0: uncompressed)")
        ->check(CLI::Range(0, 9));
    cmd->add_option("--threads", opt->threads, "Compression threads (0: all cores)")
        ->check(CLI::NonNegativeNumber);
    cmd->callback([&run, args, out, opt] {
      run = [args, out, opt] {
        check_output_path(*out, "--out");
        const auto t0 = std::chrono::steady_clock::now();
        const Graph g = load_dataset(args->pick(), args->data_dir);
        const double t_load = seconds_since(t0);
        const auto t1 = std::chrono::steady_clock::now();
        write_graph_h5(g, *out, *opt);
        spdlog::info("{}: {} nodes, {} stored edges -> {} ({} bytes; read {:.2f} s, write {:.2f} s)",
                     g.name, g.num_nodes, g.adj.nnz(), *out, std::filesystem::file_size(*out),
                     t_load, seconds_since(t1));
        return 0;
      };
    });
  }

  // ---- reorder ----
  {
    auto* cmd = data->add_subcommand(
        "reorder", "Renumber a dataset's nodes for memory locality and write it (our HDF5 format)");
    auto args = std::make_shared<DatasetArgs>();
    auto out = std::make_shared<std::string>();
    auto method = std::make_shared<std::string>("metis");
    auto block = std::make_shared<int64_t>(4096);
    auto seed = std::make_shared<uint64_t>(0);
    auto deflate = std::make_shared<int>(1);
    add_dataset_options(cmd, *args);
    cmd->add_option("--out,-o", *out, "Output .h5 file (written atomically); /original_id maps back")->required();
    cmd->add_option("--method", *method, "metis (METIS parts of --block nodes, numbered part by part), "
                                         "benefit (highest fast depth benefit first: AD_fast's active "
                                         "rows become a prefix), random (the control) or identity")
        ->capture_default_str();
    cmd->add_option("--block", *block, "Nodes per METIS part (4096 rows of 128 floats: 2 MiB)")->capture_default_str();
    cmd->add_option("--seed", *seed, "METIS / random seed")->capture_default_str();
    cmd->add_option("--deflate", *deflate, "Deflate level 0-9 for the output")->check(CLI::Range(0, 9));
    cmd->callback([&run, args, out, method, block, seed, deflate] {
      run = [args, out, method, block, seed, deflate] {
        check_output_path(*out, "--out");
        const Graph g = load_dataset(args->pick(), args->data_dir);
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<int64_t> order = locality_order(g, *method, *block, *seed);
        const double t_order = seconds_since(t0);
        const Graph h = permute_nodes(g, order);
        H5WriteOptions wo;
        wo.deflate_level = *deflate;
        write_graph_h5(h, *out, wo);
        // The block is METIS's part size; for the other methods it only sizes the locality measure.
        spdlog::info("{}: {} nodes reordered ({}) in {:.2f} s; entries within a block of {}: "
                     "{:.1f}% -> {:.1f}%; wrote {}",
                     g.name, g.num_nodes, *method, t_order, *block, 100 * same_block_fraction(g, *block),
                     100 * same_block_fraction(h, *block), *out);
        return 0;
      };
    });
  }

  // ---- generate ----
  {
    auto* cmd = data->add_subcommand(
        "generate", "Generate a contextual stochastic block model graph (our HDF5 format)");
    auto p = std::make_shared<CsbmParams>();
    auto preset = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto show_stats = std::make_shared<bool>(false);
    auto deflate = std::make_shared<int>(1);
    cmd->add_option("--preset", *preset,
                    fmt::format("Start from a preset ({}); later flags override it",
                                fmt::join(csbm_presets(), ", ")));
    cmd->add_option("--out,-o", *out, "Output .h5 file (written atomically)")->required();
    cmd->add_option("--name", p->name, "Graph name stored in the file");
    cmd->add_option("--nodes", p->nodes,
                    "Number of nodes (on a --preset: at its average degree unless --edges; fewer nodes, fewer communities)");
    cmd->add_option("--classes", p->classes, "Number of classes");
    cmd->add_option("--avg-degree", p->avg_degree, "Average degree (2 x edges / nodes)");
    cmd->add_option("--edges", p->undirected_edges, "Exact number of undirected edges (overrides --avg-degree)");
    cmd->add_option("--degree-dist", p->degree_dist, "constant or powerlaw");
    cmd->add_option("--exponent", p->powerlaw_exponent, "Power-law exponent of the degree distribution");
    cmd->add_option("--homophily", p->homophily, "Target edge homophily in [0, 1]");
    cmd->add_option("--features", p->features, "Feature dimension");
    cmd->add_option("--separation", p->separation, "Distance scale of the class means");
    cmd->add_option("--noise", p->noise, "Standard deviation of the feature noise");
    cmd->add_option("--communities", p->communities,
                    "Blocks of consecutive node ids (independent of the classes) that --locality keeps edges in");
    cmd->add_option("--locality", p->locality,
                    "Share of the edges with both ends in one community, in [0, 1] (sets how small a cut exists)");
    cmd->add_option("--seed", p->seed, "Random seed (same seed: same graph, any thread count)");
    cmd->add_option("--threads", p->threads, "Threads (0: all cores)")->check(CLI::NonNegativeNumber);
    cmd->add_option("--deflate", *deflate, "Deflate level 0-9 for the output")->check(CLI::Range(0, 9));
    cmd->add_flag("--stats", *show_stats, "Print the statistics table of the generated graph");
    cmd->callback([&run, cmd, p, preset, out, show_stats, deflate] {
      // A preset sets the defaults; flags given explicitly win (--nodes keeps its average degree).
      CsbmParams q = *p;
      if (!preset->empty()) {
        q = csbm_preset(*preset);
        auto given = [&](const char* name) { return cmd->count(name) > 0; };
        if (given("--name")) q.name = p->name;
        if (given("--nodes")) q = csbm_at_nodes(q, p->nodes);  // the preset's degree, not its edge count
        if (given("--classes")) q.classes = p->classes;
        if (given("--avg-degree")) { q.avg_degree = p->avg_degree; q.undirected_edges = -1; }
        if (given("--edges")) q.undirected_edges = p->undirected_edges;
        if (given("--degree-dist")) q.degree_dist = p->degree_dist;
        if (given("--exponent")) q.powerlaw_exponent = p->powerlaw_exponent;
        if (given("--homophily")) q.homophily = p->homophily;
        if (given("--features")) q.features = p->features;
        if (given("--separation")) q.separation = p->separation;
        if (given("--noise")) q.noise = p->noise;
        if (given("--communities")) q.communities = p->communities;
        if (given("--locality")) q.locality = p->locality;
        if (given("--seed")) q.seed = p->seed;
        if (given("--threads")) q.threads = p->threads;
      }
      run = [q, out, show_stats, deflate] {
        check_output_path(*out, "--out");
        // Under mpirun every process draws a share of the edges and writes its rows; the graph
        // is the same for any number of processes. The features are made chunk by chunk while
        // they are written, never held.
        LaunchInfo li;
        try {
          li = detect_launch({});
        } catch (const std::invalid_argument& e) {
          throw InputError(e.what());
        }
        std::unique_ptr<Communicator> comm;
        std::unique_ptr<ProcessGroup> group;
        if (launched_multi(li)) {
          if (*show_stats)
            throw InputError("--stats: needs the whole graph in one process; run `adgnn data stats` on the file");
          comm = start_mpi_ranks(li, "adgnn data generate");
          group = std::make_unique<CommProcessGroup>(*comm);
        } else {
          group = std::make_unique<LocalProcessGroup>();
        }
        const auto t0 = std::chrono::steady_clock::now();
        CsbmGraph c;
        std::string why;
        try {
          c = generate_csbm_structure(q, *group);
        } catch (const std::exception& e) {
          why = e.what();
        }
        if (const std::string first = group->first_error(why); !first.empty()) throw InputError(first);
        const Graph& g = c.graph;
        const double t_gen = seconds_since(t0);
        const auto t1 = std::chrono::steady_clock::now();
        H5WriteOptions wo;
        wo.deflate_level = *deflate;
        // Processes write one at a time: the writer uses every core it may.
        wo.threads = group->size() > 1 ? 0 : q.threads;
        write_graph_h5(g, c.first_row, c.features, *out, *group, wo);
        const double t_write = seconds_since(t1);
        // Every process's peak (MiB), then the stored entries of all.
        const int P = group->size();
        std::vector<int64_t> peaks(static_cast<size_t>(P) + 1, 0);
        peaks[group->rank()] = static_cast<int64_t>(peak_rss_gib() * 1024.0);
        peaks[P] = g.adj.nnz();
        group->sum(peaks);
        const int64_t stored = peaks[P];
        peaks.pop_back();
        if (group->rank() != 0) return 0;
        std::vector<std::string> peak_text;
        for (int64_t m : peaks) peak_text.push_back(fmt::format("{:.2f}", static_cast<double>(m) / 1024.0));
        spdlog::info("generated {}: {} nodes, {} undirected edges, by {} process{}: edges drawn in {:.2f} s; "
                     "features made and {} written and fingerprinted in {:.2f} s; peak memory per process "
                     "{} GiB (features {:.2f} GiB, never held)",
                     g.name, g.num_nodes, stored / 2, P, P == 1 ? "" : "es", t_gen, *out, t_write,
                     fmt::join(peak_text, ", "),
                     static_cast<double>(g.num_nodes) * static_cast<double>(g.features.cols) * 4 / (1 << 30));
        if (*show_stats) {  // one process: g holds every row
          GraphStats s = compute_stats(g);
          s.feature_nnz = g.num_nodes * g.features.cols;  // dense
          std::fputs(stats_table(g, s).c_str(), stdout);
        }
        return 0;
      };
    });
  }

  // ---- bench ----
  {
    auto* cmd = data->add_subcommand(
        "bench", "Load time of datasets: upstream format vs our HDF5 (prints a Markdown table)");
    auto names = std::make_shared<std::vector<std::string>>();
    auto data_dir = std::make_shared<std::string>();
    auto repeat = std::make_shared<int>(5);
    cmd->add_option("datasets", *names, "Dataset names or paths (default: every known dataset found)");
    cmd->add_option("--data-dir", *data_dir, "Folder holding the datasets (default: $ADGNN_DATA)");
    cmd->add_option("--repeat", *repeat, "Loads per format (the median is reported)")
        ->check(CLI::PositiveNumber);
    cmd->callback([&run, names, data_dir, repeat] {
      run = [names, data_dir, repeat] {
        std::vector<std::string> list = *names;
        if (list.empty())
          for (const auto& n : known_datasets()) {
            try {
              resolve_dataset(n, *data_dir);
              list.push_back(n);
            } catch (const InputError&) {
            }
          }
        if (list.empty()) throw InputError("--data-dir: no dataset found (set ADGNN_DATA)");
        const auto tmp = std::filesystem::temp_directory_path() /
                         fmt::format("adgnn-bench-{}", ::getpid());
        std::filesystem::create_directories(tmp);
        auto median_ms = [&](auto&& fn) {
          std::vector<double> t;
          for (int i = 0; i < *repeat; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            fn();
            t.push_back(1e3 * seconds_since(t0));
          }
          std::sort(t.begin(), t.end());
          return t[t.size() / 2];
        };
        std::printf("| dataset | nodes | stored edges | upstream load (ms) | HDF5 write (ms) | "
                    "HDF5 load (ms) | upstream bytes | HDF5 bytes |\n");
        std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (const auto& n : list) {
          const std::string path = resolve_dataset(n, *data_dir);
          Graph g;
          const double t_up = median_ms([&] { g = load_dataset(path); });
          const auto h5 = (tmp / (g.name + ".h5")).string();
          const double t_w = median_ms([&] { write_graph_h5(g, h5); });
          const double t_h5 = median_ms([&] { Graph h = read_graph_h5(h5); });
          uintmax_t up_bytes = 0;
          if (std::filesystem::is_directory(path)) {
            for (const auto& e : std::filesystem::recursive_directory_iterator(path))
              if (e.is_regular_file()) up_bytes += e.file_size();
          } else {
            up_bytes = std::filesystem::file_size(path);
          }
          std::printf("| %s | %lld | %lld | %.1f | %.1f | %.1f | %ju | %ju |\n", g.name.c_str(),
                      static_cast<long long>(g.num_nodes), static_cast<long long>(g.adj.nnz()),
                      t_up, t_w, t_h5, up_bytes, std::filesystem::file_size(h5));
          std::fflush(stdout);
        }
        std::filesystem::remove_all(tmp);
        return 0;
      };
    });
  }
}

}  // namespace adgnn::cli
