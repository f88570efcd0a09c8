set terminal pngcairo size 800,500 font ',10' noenhanced
set output 'exp5.png'
set grid
set key outside right
$plain << EOD
4 14.2
8 28.9
EOD
$ad << EOD
4 55.3
8 62.3
EOD
$ad_fast << EOD
4 11.5
8 21.3
EOD
set xlabel 'depth'
set ylabel 'ms per epoch'
set title 'Exp-5: time per epoch (1 rank(s))'
set xtics (4, 8)
plot $plain u 1:2 w lp title 'GCN', $ad u 1:2 w lp title 'AD-GCN', $ad_fast u 1:2 w lp title 'AD-GCN_fast'
