# engine-threads-lz4hc: lz4hc on anon-cc1plus.pages: throughput against threads (batch 1, serial; median of 5 runs, bars min-max)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot engine-threads-lz4hc.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'engine-threads-lz4hc.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'lz4hc on anon-cc1plus.pages: throughput against threads (batch 1, serial; median of 5 runs, bars min-max)'
set xlabel 'threads'
set ylabel 'throughput (MB/s of uncompressed pages)'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set yrange [0:*]
set xtics ('1' 1, '2' 2)
set offsets graph 0.04, graph 0.04, 0, 0
plot 'engine-threads-lz4hc.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 title 'codec compress', \
     'engine-threads-lz4hc.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 title 'codec decompress', \
     'engine-threads-lz4hc.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 title 'store store', \
     'engine-threads-lz4hc.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 title 'store load', \
     'engine-threads-lz4hc.dat' index 4 using 1:2 with lines dt 2 lt 1 title 'ideal: codec compress x threads', \
     'engine-threads-lz4hc.dat' index 5 using 1:2 with lines dt 2 lt 2 title 'ideal: codec decompress x threads', \
     'engine-threads-lz4hc.dat' index 6 using 1:2 with lines dt 2 lt 3 title 'ideal: store store x threads', \
     'engine-threads-lz4hc.dat' index 7 using 1:2 with lines dt 2 lt 4 title 'ideal: store load x threads'
