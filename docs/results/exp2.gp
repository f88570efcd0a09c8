set terminal pngcairo size 1100,450 font ',10' noenhanced
set output 'exp2.png'
set grid
set key outside right
$oh << EOD
0.0 93.20 1.20
0.1 87.47 1.87
0.2 76.07 1.48
0.3 62.00 1.84
0.4 55.03 2.03
0.5 56.70 1.83
0.6 64.63 1.40
0.7 73.83 1.93
0.8 82.83 2.32
0.9 90.40 1.47
1.0 96.13 1.05
EOD
$ph << EOD
0 91.1
0.1 83.05
0.2 70.15
0.3 53.15
0.4 48.8
0.5 49.8
0.6 57.45
0.7 72.55
0.8 84.6
0.9 91.8
1 97.1
EOD
$ot << EOD
0 93.20 1.20
1 91.67 0.82
2 88.17 0.86
3 85.37 0.96
4 83.13 1.69
5 78.77 1.84
6 74.50 1.09
EOD
$pt << EOD
0 91.1
1 93
2 94
3 88.3
4 79.2
5 72.75
6 60.95
EOD
set multiplot layout 1,2
set ylabel 'accuracy (%)'
set key bottom right inside
set xlabel 'edge homophily'
set title '(a) GCN vs homophily'
set yrange [40:100]
plot $oh u 1:2:3 w yerrorlines pt 7 title 'ours', $ph u 1:2 w lp dt 2 pt 6 title 'paper'
set xlabel 'degree threshold'
set title '(b) H = 0, no aggregation at degree <= threshold'
plot $ot u 1:2:3 w yerrorlines pt 7 title 'ours', $pt u 1:2 w lp dt 2 pt 6 title 'paper'
unset multiplot
