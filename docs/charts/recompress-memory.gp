# recompress-memory: mem_used_total: lz4, then idle recompression with zstd, against zstd directly (median of 9 runs, bars min-max)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot recompress-memory.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'recompress-memory.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'mem_used_total: lz4, then idle recompression with zstd, against zstd directly (median of 9 runs, bars min-max)'
set xlabel 'corpus'
set ylabel 'mem_used_total (MiB)'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set yrange [0:*]
set xtics ('anon-cc1plus.pages' 0, 'anon-python.pages' 1, 'files-mixed.pages' 2)
set xrange [-0.6:2.6]
set style fill solid 0.85 border -1
set offsets 0, 0, graph 0.08, 0
plot 'recompress-memory.dat' index 0 using ($1+(-0.3)):2:(0.2) with boxes lt 1 title 'lz4', \
     'recompress-memory.dat' index 0 using ($1+(-0.3)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'recompress-memory.dat' index 1 using ($1+(-0.1)):2:(0.2) with boxes lt 2 title 'after recompression with zstd', \
     'recompress-memory.dat' index 1 using ($1+(-0.1)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'recompress-memory.dat' index 2 using ($1+(0.1)):2:(0.2) with boxes lt 3 title 'and Compact()', \
     'recompress-memory.dat' index 2 using ($1+(0.1)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'recompress-memory.dat' index 3 using ($1+(0.3)):2:(0.2) with boxes lt 4 title 'zstd directly', \
     'recompress-memory.dat' index 3 using ($1+(0.3)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle
