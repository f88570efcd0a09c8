set terminal pngcairo size 1200,500 font ',10' noenhanced
set output 'exp4.png'
set grid
set key outside right
$citeseer_planetoid_linear << EOD
0.0 76.74 0.97
0.1 73.51 1.19
0.2 73.48 1.18
0.3 73.29 1.32
0.4 73.51 1.19
0.5 73.26 1.14
0.6 73.35 1.21
0.7 73.36 1.15
0.8 73.11 1.40
0.9 73.51 1.41
EOD
$citeseer_planetoid_log << EOD
0.0 76.28 1.11
0.1 76.16 1.12
0.2 76.85 1.08
0.3 77.09 0.77
0.4 77.03 1.24
0.5 76.74 1.07
0.6 76.53 0.83
0.7 76.58 1.47
0.8 75.69 1.29
0.9 73.03 0.93
EOD
$dblp_linear << EOD
0.0 84.65 0.36
0.1 77.29 0.57
0.2 77.37 0.60
0.3 77.24 0.53
0.4 77.17 0.48
0.5 77.19 0.47
0.6 77.22 0.47
0.7 77.24 0.58
0.8 77.15 0.61
0.9 77.34 0.52
EOD
$dblp_log << EOD
0.0 85.68 0.27
0.1 85.69 0.45
0.2 85.72 0.52
0.3 85.61 0.37
0.4 85.73 0.30
0.5 85.73 0.37
0.6 85.78 0.40
0.7 85.66 0.27
0.8 84.05 0.58
0.9 77.48 0.68
EOD
$chameleon_linear << EOD
0.0 42.16 3.32
0.1 35.05 1.96
0.2 36.87 2.70
0.3 36.69 2.69
0.4 35.78 2.90
0.5 36.72 2.01
0.6 36.03 2.71
0.7 35.56 2.65
0.8 36.81 2.33
0.9 35.93 2.21
EOD
$chameleon_log << EOD
0.0 40.74 4.05
0.1 40.09 4.88
0.2 38.61 3.31
0.3 39.06 3.85
0.4 39.99 4.11
0.5 38.76 4.08
0.6 37.94 3.39
0.7 39.54 3.27
0.8 37.69 3.79
0.9 35.96 4.49
EOD
$film_linear << EOD
0.0 29.51 1.08
0.1 36.86 1.44
0.2 36.96 1.14
0.3 37.34 1.35
0.4 37.11 1.45
0.5 37.34 1.79
0.6 36.99 1.38
0.7 37.17 1.48
0.8 36.80 1.39
0.9 37.15 1.36
EOD
$film_log << EOD
0.0 30.89 1.11
0.1 31.00 1.53
0.2 31.39 1.15
0.3 31.24 1.18
0.4 31.34 1.09
0.5 31.11 1.08
0.6 30.25 1.12
0.7 32.11 1.52
0.8 35.67 1.27
0.9 37.01 1.60
EOD
$texas_linear << EOD
0.0 53.06 6.47
0.1 80.28 9.11
0.2 79.72 9.80
0.3 79.72 8.18
0.4 79.72 8.39
0.5 80.00 8.26
0.6 80.28 8.53
0.7 79.72 8.29
0.8 80.28 8.12
0.9 80.28 8.53
EOD
$texas_log << EOD
0.0 59.17 7.64
0.1 59.17 8.79
0.2 58.89 5.68
0.3 56.67 8.09
0.4 55.00 6.11
0.5 55.56 3.70
0.6 62.50 9.28
0.7 68.06 7.66
0.8 74.17 8.89
0.9 78.89 8.51
EOD
$paper_citeseer_planetoid << EOD
0.0 79.14
0.1 76.58
0.2 76.51
0.3 76.4
0.4 76.4
0.5 76.44
0.6 76.44
0.7 76.44
0.8 76.61
0.9 76.44
EOD
$paper_dblp << EOD
0.0 84.14
0.1 77.28
0.2 77.18
0.3 77.1
0.4 77.07
0.5 77.08
0.6 77.08
0.7 77.09
0.8 77.09
0.9 77.09
EOD
$paper_chameleon << EOD
0.0 43.66
0.1 30.31
0.2 29.02
0.3 29.02
0.4 29.02
0.5 30.21
0.6 30.21
0.7 29.9
0.8 30.47
0.9 29.9
EOD
$paper_film << EOD
0.0 32.36
0.1 41.36
0.2 41.36
0.3 41.36
0.4 41.36
0.5 41.36
0.6 41.36
0.7 41.36
0.8 41.36
0.9 42.54
EOD
$paper_texas << EOD
0.0 65.9
0.1 91.97
0.2 91.97
0.3 91.97
0.4 91.97
0.5 91.97
0.6 92.3
0.7 91.97
0.8 91.97
0.9 92.3
EOD
set multiplot layout 1,2
set xlabel 'lambda'
set ylabel 'accuracy (%)'
set key bottom right inside font ',8'
set title 'AD-GCN, linear normalisation'
plot $citeseer_planetoid_linear u 1:2:3 w yerrorlines lc rgb '#1f3fbf' lw 1.5 pt 7 ps 0.6 title 'CiteSeer (Planetoid)', $dblp_linear u 1:2:3 w yerrorlines lc rgb '#2e8b57' lw 1.5 pt 7 ps 0.6 title 'DBLP', $chameleon_linear u 1:2:3 w yerrorlines lc rgb '#8b2fa0' lw 1.5 pt 7 ps 0.6 title 'Chameleon', $film_linear u 1:2:3 w yerrorlines lc rgb '#ff8c00' lw 1.5 pt 7 ps 0.6 title 'Film', $texas_linear u 1:2:3 w yerrorlines lc rgb '#008b8b' lw 1.5 pt 7 ps 0.6 title 'Texas', $paper_citeseer_planetoid u 1:2 w lp dt 2 lc rgb '#1f3fbf' pt 6 title 'paper CiteSeer (Planetoid)', $paper_dblp u 1:2 w lp dt 2 lc rgb '#2e8b57' pt 6 title 'paper DBLP', $paper_chameleon u 1:2 w lp dt 2 lc rgb '#8b2fa0' pt 6 title 'paper Chameleon', $paper_film u 1:2 w lp dt 2 lc rgb '#ff8c00' pt 6 title 'paper Film', $paper_texas u 1:2 w lp dt 2 lc rgb '#008b8b' pt 6 title 'paper Texas'
set title 'AD-GCN, log normalisation'
plot $citeseer_planetoid_log u 1:2:3 w yerrorlines lc rgb '#1f3fbf' lw 1.5 pt 7 ps 0.6 title 'CiteSeer (Planetoid)', $dblp_log u 1:2:3 w yerrorlines lc rgb '#2e8b57' lw 1.5 pt 7 ps 0.6 title 'DBLP', $chameleon_log u 1:2:3 w yerrorlines lc rgb '#8b2fa0' lw 1.5 pt 7 ps 0.6 title 'Chameleon', $film_log u 1:2:3 w yerrorlines lc rgb '#ff8c00' lw 1.5 pt 7 ps 0.6 title 'Film', $texas_log u 1:2:3 w yerrorlines lc rgb '#008b8b' lw 1.5 pt 7 ps 0.6 title 'Texas'
unset multiplot
