# fault-latency: Fault-in latency of one 4 KiB page (lz4, 16384 pages in random order, one run)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot fault-latency.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'fault-latency.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'Fault-in latency of one 4 KiB page (lz4, 16384 pages in random order, one run)'
set xlabel 'percentile of the faulting touches'
set ylabel 'latency (microseconds, log scale)'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set logscale y 10
set format y '%.12g'
set xtics ('p50' 0, 'p90' 1, 'p99' 2, 'max' 3)
set offsets graph 0.04, graph 0.04, 0, 0
plot 'fault-latency.dat' index 0 using 1:2 with linespoints lt 1 title 'stored page (decompressed)', \
     'fault-latency.dat' index 1 using 1:2 with linespoints lt 2 title 'first touch (zeroed run)', \
     'fault-latency.dat' index 2 using 1:2 with linespoints lt 3 title 'bare UFFDIO_COPY (plain memory)'
