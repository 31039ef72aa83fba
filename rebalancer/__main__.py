from rebalancer.cli.main import run

run()
