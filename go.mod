module github.com/idemstore/idemstore

go 1.26.8
