set terminal pngcairo size 1200,900 font ',10' noenhanced
set output 'exp3.png'
set grid
set key outside right
$texas_gcn_plain_linear << EOD
0 50.00 6.55 1.000
1 58.61 7.11 2.000
2 53.33 7.15 4.000
3 53.33 7.15 8.000
4 53.33 7.15 16.000
5 53.33 7.15 32.000
6 53.33 7.15 64.000
EOD
$texas_gat_plain_linear << EOD
0 55.00 6.39 1.000
1 52.50 4.98 2.000
2 53.06 7.23 4.000
3 53.33 7.15 8.000
4 53.33 7.15 16.000
5 53.33 7.15 32.000
6 53.33 7.15 64.000
EOD
$texas_gcn_ad_linear << EOD
0 77.50 8.43 0.005
1 80.28 8.12 0.011
2 78.06 9.30 0.086
3 77.22 8.26 0.061
4 76.94 9.63 0.092
5 76.94 8.39 0.175
6 73.89 12.23 0.387
EOD
$texas_gat_ad_linear << EOD
0 73.61 8.10 0.005
1 81.94 7.55 0.011
2 81.94 6.04 0.022
3 82.22 4.57 0.044
4 80.00 5.68 0.087
5 79.17 7.44 0.175
6 81.11 5.68 0.350
EOD
$texas_gcn_ad_log << EOD
0 72.50 9.11 0.060
1 74.17 8.89 0.143
2 75.00 7.05 0.102
3 75.83 8.08 0.161
4 74.17 8.08 0.179
5 73.89 6.44 0.328
6 73.89 9.82 0.477
EOD
$texas_gat_ad_log << EOD
0 63.89 9.71 0.458
1 65.28 7.99 0.489
2 66.67 10.23 0.455
3 65.83 9.45 0.555
4 62.50 7.66 0.792
5 58.61 10.67 1.172
6 57.22 5.43 1.257
EOD
$citeseer_planetoid_gcn_plain_linear << EOD
0 76.25 0.70 1.000
1 76.31 1.39 2.000
2 74.71 1.63 4.000
3 72.70 1.01 8.000
4 58.87 19.85 16.000
5 22.82 1.84 32.000
6 23.27 2.84 64.000
EOD
$citeseer_planetoid_gat_plain_linear << EOD
0 75.36 0.94 1.000
1 75.18 1.01 2.000
2 74.32 1.52 4.000
3 72.63 1.15 8.000
4 25.30 6.46 16.000
5 21.20 1.21 32.000
6 21.10 1.36 64.000
EOD
$citeseer_planetoid_gcn_ad_linear << EOD
0 75.65 0.73 1.000
1 76.74 0.97 1.000
2 76.28 1.40 1.001
3 76.44 1.45 1.002
4 76.37 0.88 1.005
5 76.55 0.98 1.009
6 76.32 1.34 1.019
EOD
$citeseer_planetoid_gat_ad_linear << EOD
0 75.14 0.93 1.000
1 76.07 1.26 1.000
2 75.57 1.14 1.001
3 76.10 1.41 1.002
4 75.80 1.35 1.005
5 76.01 1.50 1.009
6 75.81 1.37 1.019
EOD
$citeseer_planetoid_gcn_ad_log << EOD
0 75.81 0.71 1.000
1 76.16 1.28 1.983
2 75.87 1.31 2.260
3 75.74 1.44 2.328
4 76.14 1.21 2.040
5 75.78 1.28 2.282
6 75.98 1.48 2.125
EOD
$citeseer_planetoid_gat_ad_log << EOD
0 75.05 0.89 1.000
1 75.92 1.54 1.802
2 75.45 1.14 2.389
3 75.35 1.09 2.242
4 75.51 1.25 2.319
5 75.38 1.48 2.149
6 75.20 1.01 2.559
EOD
$paper_texas_gcn_plain << EOD
0 59.01
1 60
2 59.55
3 57.48
4 39.91
5 25.5
6 27.39
EOD
$paper_texas_gat_plain << EOD
0 59.54
1 61.21
2 58.28
3 57.65
4 41.71
5 18.64
6 6.76
EOD
$paper_texas_gcn_ad << EOD
0 88.52
1 92.3
2 85.25
3 85.25
4 86.89
5 86.89
6 83.61
EOD
$paper_texas_gat_ad << EOD
0 83.11
1 90.49
2 88.52
3 88.52
4 90.16
5 88.52
6 83.61
EOD
$paper_texas_gcn_ad << EOD
0 88.52
1 92.3
2 85.25
3 85.25
4 86.89
5 86.89
6 83.61
EOD
$paper_texas_gat_ad << EOD
0 83.11
1 90.49
2 88.52
3 88.52
4 90.16
5 88.52
6 83.61
EOD
$paper_citeseer_planetoid_gcn_plain << EOD
0 74.24
1 76.68
2 76.17
3 60.78
4 11.38
5 1.71
6 1.71
EOD
$paper_citeseer_planetoid_gat_plain << EOD
0 73.86
1 75.46
2 74.35
3 60.97
4 14.86
5 1.9
6 1.59
EOD
$paper_citeseer_planetoid_gcn_ad << EOD
0 77.65
1 79.14
2 78.35
3 77.9
4 77.22
5 77.63
6 76.92
EOD
$paper_citeseer_planetoid_gat_ad << EOD
0 77.34
1 79.92
2 78.09
3 78.09
4 77.76
5 77.83
6 76.88
EOD
$paper_citeseer_planetoid_gcn_ad << EOD
0 77.65
1 79.14
2 78.35
3 77.9
4 77.22
5 77.63
6 76.92
EOD
$paper_citeseer_planetoid_gat_ad << EOD
0 77.34
1 79.92
2 78.09
3 78.09
4 77.76
5 77.83
6 76.88
EOD
set multiplot layout 2,2
set xtics ('1' 0, '2' 1, '4' 2, '8' 3, '16' 4, '32' 5, '64' 6)
set xlabel 'depth'
set key bottom left inside font ',8'
set title 'Texas: accuracy'
set ylabel 'accuracy (%)'
set yrange [0:100]
plot $texas_gcn_plain_linear u 1:2:3 w yerrorlines lc rgb '#d62728' dt 1 lw 1.5 pt 7 ps 0.6 title 'GCN ', $texas_gat_plain_linear u 1:2:3 w yerrorlines lc rgb '#1f77b4' dt 1 lw 1.5 pt 7 ps 0.6 title 'GAT ', $texas_gcn_ad_linear u 1:2:3 w yerrorlines lc rgb '#ff7f0e' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GCN linear', $texas_gat_ad_linear u 1:2:3 w yerrorlines lc rgb '#2ca02c' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GAT linear', $texas_gcn_ad_log u 1:2:3 w yerrorlines lc rgb '#ff7f0e' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GCN log', $texas_gat_ad_log u 1:2:3 w yerrorlines lc rgb '#2ca02c' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GAT log', $paper_texas_gcn_plain u 1:2 w lp dt 2 lc rgb '#d62728' pt 6 title 'paper GCN', $paper_texas_gat_plain u 1:2 w lp dt 2 lc rgb '#1f77b4' pt 6 title 'paper GAT', $paper_texas_gcn_ad u 1:2 w lp dt 2 lc rgb '#ff7f0e' pt 6 title 'paper AD-GCN', $paper_texas_gat_ad u 1:2 w lp dt 2 lc rgb '#2ca02c' pt 6 title 'paper AD-GAT'
set title 'Texas: mean T(v)'
set ylabel 'mean T(v)'
set yrange [0:*]
plot $texas_gcn_ad_linear u 1:4 w lp lc rgb '#ff7f0e' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GCN linear', $texas_gat_ad_linear u 1:4 w lp lc rgb '#2ca02c' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GAT linear', $texas_gcn_ad_log u 1:4 w lp lc rgb '#ff7f0e' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GCN log', $texas_gat_ad_log u 1:4 w lp lc rgb '#2ca02c' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GAT log'
set title 'CiteSeer (Planetoid): accuracy'
set ylabel 'accuracy (%)'
set yrange [0:100]
plot $citeseer_planetoid_gcn_plain_linear u 1:2:3 w yerrorlines lc rgb '#d62728' dt 1 lw 1.5 pt 7 ps 0.6 title 'GCN ', $citeseer_planetoid_gat_plain_linear u 1:2:3 w yerrorlines lc rgb '#1f77b4' dt 1 lw 1.5 pt 7 ps 0.6 title 'GAT ', $citeseer_planetoid_gcn_ad_linear u 1:2:3 w yerrorlines lc rgb '#ff7f0e' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GCN linear', $citeseer_planetoid_gat_ad_linear u 1:2:3 w yerrorlines lc rgb '#2ca02c' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GAT linear', $citeseer_planetoid_gcn_ad_log u 1:2:3 w yerrorlines lc rgb '#ff7f0e' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GCN log', $citeseer_planetoid_gat_ad_log u 1:2:3 w yerrorlines lc rgb '#2ca02c' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GAT log', $paper_citeseer_planetoid_gcn_plain u 1:2 w lp dt 2 lc rgb '#d62728' pt 6 title 'paper GCN', $paper_citeseer_planetoid_gat_plain u 1:2 w lp dt 2 lc rgb '#1f77b4' pt 6 title 'paper GAT', $paper_citeseer_planetoid_gcn_ad u 1:2 w lp dt 2 lc rgb '#ff7f0e' pt 6 title 'paper AD-GCN', $paper_citeseer_planetoid_gat_ad u 1:2 w lp dt 2 lc rgb '#2ca02c' pt 6 title 'paper AD-GAT'
set title 'CiteSeer (Planetoid): mean T(v)'
set ylabel 'mean T(v)'
set yrange [0:*]
plot $citeseer_planetoid_gcn_ad_linear u 1:4 w lp lc rgb '#ff7f0e' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GCN linear', $citeseer_planetoid_gat_ad_linear u 1:4 w lp lc rgb '#2ca02c' dt 1 lw 1.5 pt 7 ps 0.6 title 'AD-GAT linear', $citeseer_planetoid_gcn_ad_log u 1:4 w lp lc rgb '#ff7f0e' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GCN log', $citeseer_planetoid_gat_ad_log u 1:4 w lp lc rgb '#2ca02c' dt 3 lw 1.5 pt 7 ps 0.6 title 'AD-GAT log'
unset multiplot
