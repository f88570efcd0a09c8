set terminal pngcairo size 1200,500 font ',10' noenhanced
set output 'appendix.png'
set grid
set key outside right
$speed << EOD
0 71.67 citeseer_planetoid
0 77.86 chameleon
0 7.32 cornell
0 8.97 wisconsin
0 7.58 texas
1 69.74 citeseer_planetoid
1 62.56 chameleon
1 7.54 cornell
1 8.60 wisconsin
1 7.21 texas
2 69.45 citeseer_planetoid
2 78.97 chameleon
2 7.60 cornell
2 8.80 wisconsin
2 6.99 texas
3 73.37 citeseer_planetoid
3 66.60 chameleon
3 6.83 cornell
3 8.95 wisconsin
3 7.22 texas
4 64.51 citeseer_planetoid
4 62.30 chameleon
4 7.21 cornell
4 8.87 wisconsin
4 6.98 texas
5 61.56 citeseer_planetoid
5 76.80 chameleon
5 6.88 cornell
5 8.60 wisconsin
5 7.67 texas
6 279.81 citeseer_planetoid
6 60.15 chameleon
6 7.12 cornell
6 9.35 wisconsin
6 7.45 texas
EOD
$b_dblp_linear << EOD
1 6.468763507639154e-05
2 0.00015580157658737456
4 0.00046173698608800826
8 0.0018084442587916548
16 0.006925952697786751
32 0.026476327062507188
64 0.07917638718236736
128 0.21299484852837244
256 0.005099390167742968
EOD
$b_dblp_log << EOD
1 0.7426021369998771
2 0.7083983469756883
4 0.7361578317531942
8 0.7925070172459967
16 0.8389867841649581
32 0.8798403478602865
64 0.9117775546179877
128 0.9258072773615519
256 0.9995938837528229
EOD
$b_chameleon_linear << EOD
1 2.2135166186680744e-05
2 2.4552523531286107e-05
4 9.865374030643385e-05
8 0.0005221891414268591
16 0.0027630013346683275
32 0.027652942291837235
64 0.045722585041703824
128 0.6008014678955078
EOD
$b_chameleon_log << EOD
1 0.6797958542318905
2 0.6892675027439866
4 0.6908769364966902
8 0.6715240916237235
16 0.7344175987854237
32 0.7447169919808706
64 0.815341652858825
128 0.9585840344429016
EOD
$b_cornell_linear << EOD
1 2.2882319450713104e-05
2 9.94749270407606e-05
4 0.0005631432892579303
8 0.003031823975366673
64 1.0
EOD
$b_cornell_log << EOD
1 0.7654299485056024
2 0.6753357878473939
4 0.7399694645091107
8 0.8303066151482719
64 1.0
EOD
$b_wisconsin_linear << EOD
1 2.0461031595184683e-05
2 3.780432476453524e-05
4 0.0004685236404616285
8 0.0026834351603307973
16 0.003631250001490116
64 1.0
EOD
$b_wisconsin_log << EOD
1 0.4806218227514854
2 0.5389410747676833
4 0.6565204870242339
8 0.7817450841267903
16 0.863956868648529
64 1.0
EOD
$b_texas_linear << EOD
1 3.842927731564123e-06
2 1.7226924257676328e-05
4 0.0005753962043998303
8 0.0033693368732201634
16 0.006635711994022131
64 1.0
EOD
$b_texas_log << EOD
1 0.4890753541673933
2 0.699840536074979
4 0.7885184978183947
8 0.83539679646492
16 0.8522460460662842
64 1.0
EOD
set multiplot layout 1,2
set title 'AD-GCN_fast: ms per epoch by heuristic'
set ylabel 'ms per epoch'
set xtics rotate by -30 ('degree' 0, 'common_neighbours' 1, 'jaccard' 2, 'adamic_adar' 3, 'betweenness' 4, 'kshell' 5, 'clustering' 6)
set xrange [-0.5:6.5]
plot $speed u 1:(strcol(3) eq 'chameleon' ? $2 : NaN) w p pt 7 ps 1.5 title 'Chameleon', $speed u 1:(strcol(3) eq 'citeseer_planetoid' ? $2 : NaN) w p pt 7 ps 1.5 title 'CiteSeer (Planetoid)', $speed u 1:(strcol(3) eq 'cornell' ? $2 : NaN) w p pt 7 ps 1.5 title 'Cornell', $speed u 1:(strcol(3) eq 'texas' ? $2 : NaN) w p pt 7 ps 1.5 title 'Texas', $speed u 1:(strcol(3) eq 'wisconsin' ? $2 : NaN) w p pt 7 ps 1.5 title 'Wisconsin'
set xtics norotate autofreq
set autoscale x
set logscale x 2
set title 'mean eps~ per degree bucket [2^b, 2^(b+1)) (log normalisation)'
set xlabel 'degree'
set ylabel 'mean eps~'
plot $b_dblp_log u 1:2 w lp pt 7 ps 0.6 title 'DBLP', $b_chameleon_log u 1:2 w lp pt 7 ps 0.6 title 'Chameleon', $b_cornell_log u 1:2 w lp pt 7 ps 0.6 title 'Cornell', $b_wisconsin_log u 1:2 w lp pt 7 ps 0.6 title 'Wisconsin', $b_texas_log u 1:2 w lp pt 7 ps 0.6 title 'Texas'
unset multiplot
