// Same-label heuristics for the fast variant (internal): the paper's degree product and the
// alternatives its appendix compares (common neighbours, Jaccard, Adamic-Adar, betweenness,
// k-shell, clustering coefficient). Each gives p_uv in [0, 1] per edge of the symmetric graph;
// d+_v = sum over neighbours of p_uv (model.cpp). They need the whole graph (one process).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace adgnn::detail {

// "degree" (the paper's, default), "common_neighbours", "jaccard", "adamic_adar",
// "betweenness", "kshell", "clustering".
const std::vector<std::string>& heuristic_names();
bool known_heuristic(const std::string& name);
// Throws InputError("--heuristic <name>: unknown (...)") for a name not in the list.
void check_heuristic(const std::string& name);

// Node scores on a symmetric, self-loop-free CSR (rowptr [N + 1], col [nnz]).
// Betweenness: unnormalised, each unordered pair once (Brandes).
std::vector<double> betweenness_centrality(const std::vector<int64_t>& rowptr, const std::vector<int64_t>& col);
std::vector<double> core_numbers(const std::vector<int64_t>& rowptr, const std::vector<int64_t>& col);
std::vector<double> clustering_coefficients(const std::vector<int64_t>& rowptr, const std::vector<int64_t>& col);

// p_uv per CSR entry (row v, column u) as float64 on the CPU:
// - degree: d_u d_v / max over edges of d_i d_j (the paper's formula);
// - common_neighbours: |N(u) & N(v)| / the largest such count over the edges (the degree
//   product's normalisation; 0 everywhere on a triangle-free graph);
// - jaccard: |N(u) & N(v)| / |N(u) | N(v)|;
// - adamic_adar: sum over common neighbours w of 1 / log d_w, divided by its maximum over edges;
// - betweenness, kshell, clustering: the similarity of the two nodes' scores,
//   1 - |s_u - s_v| / (max s - min s) over all nodes (1 when every score is equal).
// rowptr / col may live on any device and be int32 or int64.
at::Tensor same_label_probability(const std::string& name, const at::Tensor& rowptr, const at::Tensor& col);

}  // namespace adgnn::detail
