set terminal pngcairo size 800,500 font ',10' noenhanced
set output 'exp5.png'
set grid
set key outside right
$plain_P1 << EOD
4 14.2
8 28.9
EOD
$ad_P1 << EOD
4 55.3
8 62.3
EOD
$ad_fast_P1 << EOD
4 11.5
8 21.3
EOD
$plain_P4 << EOD
4 22.6
8 36.7
EOD
$ad_P4 << EOD
4 51.5
8 64.5
EOD
$ad_fast_P4 << EOD
4 30.2
8 51.7
EOD
set xlabel 'depth'
set ylabel 'ms per epoch'
set title 'Exp-5: time per epoch'
set xtics (4, 8)
plot $plain_P1 u 1:2 w lp lc 1 dt 1 title 'GCN, 1 rank', $ad_P1 u 1:2 w lp lc 2 dt 1 title 'AD-GCN, 1 rank', $ad_fast_P1 u 1:2 w lp lc 3 dt 1 title 'AD-GCN_fast, 1 rank', $plain_P4 u 1:2 w lp lc 1 dt 2 title 'GCN, 4 ranks', $ad_P4 u 1:2 w lp lc 2 dt 2 title 'AD-GCN, 4 ranks', $ad_fast_P4 u 1:2 w lp lc 3 dt 2 title 'AD-GCN_fast, 4 ranks'
