# engine-batch-lzo: lzo on anon-cc1plus.pages: throughput against batch size and backend (1 thread; median of 5 runs, bars min-max)
# Drawn by `ztier bench ... --plot DIR`; to draw it again, in this folder: gnuplot engine-batch-lzo.gp
set terminal pngcairo size 960,600 noenhanced font 'sans,11'
set output 'engine-batch-lzo.png'
set linetype 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#ff7f0e' lw 2 pt 7 ps 1.2
set linetype 3 lc rgb '#2ca02c' lw 2 pt 7 ps 1.2
set linetype 4 lc rgb '#d62728' lw 2 pt 7 ps 1.2
set linetype 5 lc rgb '#9467bd' lw 2 pt 7 ps 1.2
set linetype 6 lc rgb '#8c564b' lw 2 pt 7 ps 1.2
set linetype 7 lc rgb '#e377c2' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#7f7f7f' lw 2 pt 7 ps 1.2
set title 'lzo on anon-cc1plus.pages: throughput against batch size and backend (1 thread; median of 5 runs, bars min-max)'
set xlabel 'batch size (pages) and batch backend'
set ylabel 'throughput (MB/s of uncompressed pages)'
set key outside bottom center horizontal Left reverse
set grid ytics lc rgb '#d0d0d0'
set border 3
set tics nomirror
set yrange [0:*]
set xtics ('batch 1, serial' 0, 'batch 8, serial' 1, 'batch 8, parallel' 2)
set xrange [-0.6:2.6]
set style fill solid 0.85 border -1
set offsets 0, 0, graph 0.08, 0
plot 'engine-batch-lzo.dat' index 0 using ($1+(-0.32)):2:(0.16) with boxes lt 1 title 'codec compress', \
     'engine-batch-lzo.dat' index 0 using ($1+(-0.32)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'engine-batch-lzo.dat' index 0 using ($1+(-0.32)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'engine-batch-lzo.dat' index 1 using ($1+(-0.16)):2:(0.16) with boxes lt 2 title 'codec decompress', \
     'engine-batch-lzo.dat' index 1 using ($1+(-0.16)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'engine-batch-lzo.dat' index 1 using ($1+(-0.16)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'engine-batch-lzo.dat' index 2 using ($1+(0)):2:(0.16) with boxes lt 3 title 'store store', \
     'engine-batch-lzo.dat' index 2 using ($1+(0)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'engine-batch-lzo.dat' index 2 using ($1+(0)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'engine-batch-lzo.dat' index 3 using ($1+(0.16)):2:(0.16) with boxes lt 4 title 'store load', \
     'engine-batch-lzo.dat' index 3 using ($1+(0.16)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'engine-batch-lzo.dat' index 3 using ($1+(0.16)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle, \
     'engine-batch-lzo.dat' index 4 using ($1+(0.32)):2:(0.16) with boxes lt 5 title 'store overwrite', \
     'engine-batch-lzo.dat' index 4 using ($1+(0.32)):3:(0):($4-$3) with vectors heads size screen 0.006,90 lc rgb 'black' lw 1.5 notitle, \
     'engine-batch-lzo.dat' index 4 using ($1+(0.32)):4:(sprintf('%.4g', $2)) with labels nopoint offset 0,0.8 font ',9' notitle
