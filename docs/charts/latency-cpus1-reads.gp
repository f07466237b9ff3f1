# latency-cpus1-reads: High-priority reads, 1 CPU: shared stream vs separate paths (median of 5 runs, bars min-max)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot latency-cpus1-reads.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'latency-cpus1-reads.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'High-priority reads, 1 CPU: shared stream vs separate paths (median of 5 runs, bars min-max)'
set xlabel 'percentile of the reads of one run'
set ylabel 'latency (microseconds, log scale)'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set logscale y 10
set format y '%.12g'
set xtics ('p50' 0, 'p90' 1, 'p99' 2, 'p99.9' 3, 'p99.99' 4, 'max' 5)
set offsets graph 0.04, graph 0.04, 0, 0
plot 'latency-cpus1-reads.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 title 'shared', \
     'latency-cpus1-reads.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 title 'separate'
