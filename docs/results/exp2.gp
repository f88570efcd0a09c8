set terminal pngcairo size 1100,450 font ',10' noenhanced
set output 'exp2.png'
set grid
set key outside right
$oh << EOD
0.0 93.00 1.68
0.1 87.05 1.82
0.2 76.83 1.58
0.3 61.60 2.16
0.4 54.57 1.50
0.5 56.38 1.81
0.6 64.57 1.70
0.7 74.03 1.75
0.8 82.58 1.76
0.9 90.55 1.31
1.0 96.15 0.87
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
0 93.00 1.68
1 91.65 1.36
2 88.00 0.96
3 85.33 0.96
4 82.37 1.83
5 78.63 1.58
6 74.47 1.69
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
