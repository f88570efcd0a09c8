set terminal pngcairo size 800,700 font ',10' noenhanced
set output 'exp1.png'
set grid
set key outside right
$plain << EOD
55.14 50.56
61.6 58.80
60.0 58.61
53.64 46.94
60.0 53.40
61.21 52.50
75.95 63.61
81.18 75.80
82.43 76.94
73.51 66.67
75.88 82.80
77.84 81.11
61.35 48.89
64.12 51.80
67.84 55.00
76.51 71.39
80.5 82.80
76.25 80.28
EOD
$ad << EOD
88.51 70.00
93.88 80.40
92.3 80.28
86.17 73.61
91.5 84.00
90.49 81.94
89.57 71.11
94.62 84.80
92.95 83.61
90.21 70.83
94.75 84.40
94.43 86.11
86.38 73.89
91.25 84.80
90.16 78.06
91.7 75.00
95.13 85.40
92.95 84.17
EOD
$ad_fast << EOD
87.02 71.67
94.38 83.40
91.64 79.72
85.96 73.06
92.62 85.40
90.82 82.50
90.64 72.50
94.25 85.40
92.79 83.89
90.0 75.28
92.0 83.20
90.0 84.44
87.66 74.17
92.37 85.40
92.46 80.56
89.57 74.44
93.38 84.60
92.79 84.17
EOD
$ad_sharp << EOD
89.79 73.06
94.0 84.00
91.97 80.28
90.85 73.89
94.75 84.20
92.95 81.39
89.57 72.22
94.75 85.20
93.44 82.78
EOD
set xlabel 'paper accuracy (%)'
set ylabel 'our accuracy (%)'
set xrange [20:100]
set yrange [20:100]
set title 'Exp-1: ours against the paper (every backbone and dataset)'
plot x title 'equal' lc rgb 'gray', $plain u 1:2 w p pt 7 title 'plain', $ad u 1:2 w p pt 5 title 'AD', $ad_fast u 1:2 w p pt 9 title 'AD_fast', $ad_sharp u 1:2 w p pt 11 title 'AD#'
